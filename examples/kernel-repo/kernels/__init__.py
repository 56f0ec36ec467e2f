"""gemmlab's kernels. A package named `kernels` on purpose: perfci's own kernels
install as `perfci_kernels`, so this one is never shadowed."""
