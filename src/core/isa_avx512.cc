// Built with the flags of every *_avx512.cc kernel file (cmake/ember.cmake): what the compiler
// targets here, it targeted there. No header: code inlined from one would be built for this ISA
// and could be the copy the linker keeps for baseline callers (quant/gguf_blocks.h).

namespace ember::internal {

// Declared in core/isa.h.
bool CompilerTargetsAvx512() {
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__AVX512DQ__) && \
    defined(__AVX512VNNI__) && defined(__AVX512BF16__)
  return true;
#else
  return false;
#endif
}

}  // namespace ember::internal
