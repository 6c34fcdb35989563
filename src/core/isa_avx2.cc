// Built with the flags of every *_avx2.cc kernel file (cmake/ember.cmake): what the compiler
// targets here, it targeted there. No header: code inlined from one would be built for this ISA
// and could be the copy the linker keeps for baseline callers (quant/gguf_blocks.h).

namespace ember::internal {

// Declared in core/isa.h.
bool CompilerTargetsAvx2() {
#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
  return true;
#else
  return false;
#endif
}

}  // namespace ember::internal
