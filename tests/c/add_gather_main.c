/* Assembles C(i,j) = A(i,j) + B(i,j) (CSR) from C the way threads would, through the
 * exported gather phases of "add_csr": setup once; append each row range [lo, hi) into a
 * copy of C's descriptor whose crd and values start NULL (the range's own buffers) while
 * pos stays shared; concatenate the ranges' crd and values in row order; finish with the
 * total. The ranges run one after the other here: the protocol, not the threads, is
 * under test. Same inputs as add_main.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "k.h"

#define RANGES 3

static void print_ints(const char *name, const int32_t *values, int64_t count) {
    printf("%s:", name);
    for (int64_t k = 0; k < count; k++) {
        printf(" %d", (int)values[k]);
    }
    printf("\n");
}

int main(void) {
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

    int32_t status = add_csr_setup(tensors);  /* allocates C's pos, shared by the ranges */
    const int64_t bounds[RANGES + 1] = {0, 1, 3, 4};
    int64_t entries[RANGES] = {0};
    void *own_arrays[RANGES][3];
    int64_t own_caps[RANGES][3], own_sizes[RANGES][2];
    llvsparse_tensor own[RANGES];
    for (int r = 0; r < RANGES && status == 0; r++) {
        own_arrays[r][0] = C.arrays[0];
        own_arrays[r][1] = own_arrays[r][2] = NULL;
        own_caps[r][0] = C.capacities[0];
        own_caps[r][1] = own_caps[r][2] = 0;
        own_sizes[r][0] = own_sizes[r][1] = 0;
        own[r] = (llvsparse_tensor){2, c_extents, own_sizes[r], own_arrays[r], own_caps[r],
                                    no_params};
        llvsparse_tensor *mine[] = {&own[r], &A, &B};
        status = add_csr_append(mine, bounds[r], bounds[r + 1], &entries[r]);
    }
    printf("status: %d\n", (int)status);
    if (status != 0) {
        return 1;
    }
    int64_t total = 0;
    for (int r = 0; r < RANGES; r++) {
        total += entries[r];
    }
    int32_t *crd = malloc((size_t)(total ? total : 1) * sizeof(int32_t));
    double *val = malloc((size_t)(total ? total : 1) * sizeof(double));
    int64_t offset = 0;
    for (int r = 0; r < RANGES; r++) {
        if (entries[r]) {
            memcpy(crd + offset, own_arrays[r][1], (size_t)entries[r] * sizeof(int32_t));
            memcpy(val + offset, own_arrays[r][2], (size_t)entries[r] * sizeof(double));
        }
        offset += entries[r];
        free(own_arrays[r][1]);
        free(own_arrays[r][2]);
    }
    C.arrays[1] = crd;
    C.arrays[2] = val;
    C.capacities[1] = C.capacities[2] = total;
    status = add_csr_finish(tensors, total);
    printf("finish: %d\n", (int)status);
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
