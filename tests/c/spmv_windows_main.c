/* Calls an exported SpMV kernel whose threads cut rows (an entry split), from C: the
 * range function takes a row range and a window of A's positions, and adds the rows
 * the window cuts into the zeroed output. Two windows, [0, 3) and [3, 7), cut row 1.
 *   cc -O1 -I DIR spmv_windows_main.c DIR/k.o -o prog */
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

    /* Allocated and zeroed by the caller, as the header asks of range calls. */
    double *y_val = calloc(4, sizeof(double));
    int64_t y_extents[] = {4}, y_sizes[] = {4}, y_caps[] = {4};
    void *y_arrays[] = {y_val};
    llvsparse_tensor y = {1, y_extents, y_sizes, y_arrays, y_caps, no_params};

    llvsparse_tensor *tensors[] = {&y, &A, &x};
    /* Window [0, 3) touches rows 0 and 1; window [3, 7) rows 1 to 3. */
    int32_t status = spmv_range(tensors, 0, 2, 0, 3);
    if (status == 0) {
        status = spmv_range(tensors, 1, 4, 3, 7);
    }
    printf("status: %d\n", (int)status);
    if (status != 0) {
        return 1;
    }
    printf("y:");
    for (int64_t k = 0; k < 4; k++) {
        printf(" %.17g", ((double *)y.arrays[0])[k]);
    }
    printf("\n");
    free(y.arrays[0]);
    return 0;
}
