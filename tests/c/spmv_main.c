/* Calls an exported llvsparse SpMV kernel, y(i) = A(i,j) * x(j) with A in CSR, from C.
 *
 * The test exports the kernel as k.o + k.h (function "spmv") and builds this file with
 *   cc -O1 -I DIR spmv_main.c DIR/k.o -o prog
 * Descriptors are filled as k.h documents: y, A, x in tensors[] order; A's arrays are
 * level 1 pos, level 1 crd, then values; int32 indices, double values. */
#include <stdio.h>
#include <stdlib.h>

#include "k.h"

int main(void) {
    /* A (4x6):  [5 1 0 0 0 0]
                 [7 3 0 0 0 0]
                 [0 0 0 0 0 0]
                 [8 0 0 4 9 0] */
    int32_t a_pos[] = {0, 2, 4, 4, 7};
    int32_t a_crd[] = {0, 1, 0, 1, 0, 3, 4};
    double a_val[] = {5, 1, 7, 3, 8, 4, 9};
    double x_val[] = {1, 2, 3, 4, 5, 6};
    int64_t no_params[1] = {0};

    int64_t a_extents[] = {4, 6}, a_sizes[] = {4, 7}, a_caps[] = {5, 7, 7};
    void *a_arrays[] = {a_pos, a_crd, a_val};
    llvsparse_tensor A = {2, a_extents, a_sizes, a_arrays, a_caps, no_params};

    int64_t x_extents[] = {6}, x_sizes[] = {6}, x_caps[] = {6};
    void *x_arrays[] = {x_val};
    llvsparse_tensor x = {1, x_extents, x_sizes, x_arrays, x_caps, no_params};

    /* The output starts empty: the kernel allocates its values with malloc. */
    int64_t y_extents[] = {4}, y_sizes[] = {0}, y_caps[] = {0};
    void *y_arrays[] = {NULL};
    llvsparse_tensor y = {1, y_extents, y_sizes, y_arrays, y_caps, no_params};

    llvsparse_tensor *tensors[] = {&y, &A, &x};
    int32_t status = spmv(tensors);
    printf("status: %d\n", (int)status);
    if (status != 0) {
        return 1;
    }
    const double *y_val = y.arrays[0];
    printf("y:");
    for (int64_t k = 0; k < y.sizes[0]; k++) {
        printf(" %.17g", y_val[k]);
    }
    printf("\n");
    free(y.arrays[0]);
    return 0;
}
