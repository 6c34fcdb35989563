// safetensors headers (formats/safetensors.h): the length prefix, the JSON header, dtypes, shapes
// and offsets. Beyond "no crash": every tensor Open() accepts lies inside the file.
#include "formats/safetensors.h"

#include "file_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto file = ember::SafetensorsFile::Open(ember::fuzz::AsFile(data, size));
  if (!file.ok()) return 0;
  const ember::SafetensorsFile& st = **file;
  for (const ember::SafetensorTensor& t : st.tensors()) {
    ember::fuzz::CheckInside(st.mapped_bytes() + st.data_offset() + t.data_begin, t.NumBytes(), st.mapped_bytes(),
                             st.file_size());
  }
  (void)st.TotalTensorBytes();
  return 0;
}
