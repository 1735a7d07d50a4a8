"""The LLVM backend: the loop IR emitted as llvmlite IR, levels' YAML functions inlined."""
