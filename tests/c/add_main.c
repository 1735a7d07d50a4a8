/* Calls an exported llvsparse sparse add, C(i,j) = A(i,j) + B(i,j) with A, B and C in CSR,
 * from C, and frees the output the kernel assembled.
 *
 * The test exports the kernel as k.o + k.h (function "add_csr") and builds this file with
 *   cc -O1 -I DIR add_main.c DIR/k.o -o prog
 * Descriptors follow k.h: C, A, B in tensors[] order; arrays are level 1 pos, level 1 crd,
 * then values; int32 indices, double values. The output's arrays start NULL with capacity
 * 0; the kernel mallocs them, writes positions per level into sizes, and we free() them. */
#include <stdio.h>
#include <stdlib.h>

#include "k.h"

static void print_ints(const char *name, const int32_t *values, int64_t count) {
    printf("%s:", name);
    for (int64_t k = 0; k < count; k++) {
        printf(" %d", (int)values[k]);
    }
    printf("\n");
}

int main(void) {
    /* A (4x6):  [5 1 0 0 0 0]      B (4x6):  [0 2 0 0 0 1]
                 [7 3 0 0 0 0]                [0 0 0 0 0 0]
                 [0 0 0 0 0 0]                [3 0 0 0 0 0]
                 [8 0 0 4 9 0]                [8 0 6 0 0 0] */
    int32_t a_pos[] = {0, 2, 4, 4, 7};
    int32_t a_crd[] = {0, 1, 0, 1, 0, 3, 4};
    double a_val[] = {5, 1, 7, 3, 8, 4, 9};
    int32_t b_pos[] = {0, 2, 2, 3, 5};
    int32_t b_crd[] = {1, 5, 0, 0, 2};
    double b_val[] = {2, 1, 3, 8, 6};
    int64_t no_params[1] = {0};

    int64_t a_extents[] = {4, 6}, a_sizes[] = {4, 7}, a_caps[] = {5, 7, 7};
    void *a_arrays[] = {a_pos, a_crd, a_val};
    llvsparse_tensor A = {2, a_extents, a_sizes, a_arrays, a_caps, no_params};

    int64_t b_extents[] = {4, 6}, b_sizes[] = {4, 5}, b_caps[] = {5, 5, 5};
    void *b_arrays[] = {b_pos, b_crd, b_val};
    llvsparse_tensor B = {2, b_extents, b_sizes, b_arrays, b_caps, no_params};

    int64_t c_extents[] = {4, 6}, c_sizes[] = {0, 0}, c_caps[] = {0, 0, 0};
    void *c_arrays[] = {NULL, NULL, NULL};
    llvsparse_tensor C = {2, c_extents, c_sizes, c_arrays, c_caps, no_params};

    llvsparse_tensor *tensors[] = {&C, &A, &B};
    int32_t status = add_csr(tensors);
    printf("status: %d\n", (int)status);
    if (status != 0) {
        return 1;
    }
    int64_t rows = C.sizes[0], nnz = C.sizes[1];
    printf("sizes: %lld %lld\n", (long long)rows, (long long)nnz);
    print_ints("pos", C.arrays[0], rows + 1);
    print_ints("crd", C.arrays[1], nnz);
    const double *c_val = C.arrays[2];
    printf("vals:");
    for (int64_t k = 0; k < nnz; k++) {
        printf(" %.17g", c_val[k]);
    }
    printf("\n");
    for (int k = 0; k < 3; k++) {
        free(C.arrays[k]);
    }
    return 0;
}
