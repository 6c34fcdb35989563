// GGUF headers (formats/gguf.h): metadata of every type, nested arrays, tensor infos. Beyond "no
// crash": every tensor Open() accepts lies inside the file, and metadata reads are safe.
#include "formats/gguf.h"

#include "file_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto file = ember::GgufFile::Open(ember::fuzz::AsFile(data, size));
  if (!file.ok()) return 0;
  const ember::GgufFile& gguf = **file;
  for (const ember::GgufTensor& t : gguf.tensors()) {
    ember::fuzz::CheckInside(t.data, t.bytes, gguf.mapped_bytes(), gguf.file_size());
    (void)t.NumElements();
  }
  for (std::string_view key : gguf.Keys()) {
    (void)gguf.GetInt(key);
    (void)gguf.GetFloat(key);
    (void)gguf.GetString(key);
    (void)gguf.GetStringArray(key);
    (void)gguf.GetFloatArray(key);
    (void)gguf.GetIntArray(key);
  }
  return 0;
}
