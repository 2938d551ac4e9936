/* The suite's kernels: PTX text for real GPUs, host functions for the host
 * executor (kernels.c). */
#ifndef STREAMLEDGER_TESTS_CUDA_KERNELS_H
#define STREAMLEDGER_TESTS_CUDA_KERNELS_H

/* PTX (ISA 7.8, sm_90) with the entries add1(unsigned *data, unsigned n),
 * spin(unsigned long long ns) and trap_kernel(). */
extern const char slc_test_ptx[];

/* Registers add1, spin and trap_kernel with the host executor. */
void slc_test_register_host_kernels(void);

#endif /* STREAMLEDGER_TESTS_CUDA_KERNELS_H */
