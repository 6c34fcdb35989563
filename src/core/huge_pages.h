// Memory for large buffers that live as long as a model and are read through on every step (the
// repacked weights): carved from 2 MiB-aligned chunks advised MADV_HUGEPAGE. A decode step streams
// every weight once; on 4 KiB pages that is a TLB miss, and a stop of the hardware prefetcher, per
// 4 KiB, so batch-1 decode and prefill of SmolLM2-135M Q4_1 ran ~10% faster once its repacked
// weights sat on transparent huge pages (bench/results/huge_pages/README.md). Most matrices are
// smaller than 2 MiB, so each taking its own mapping would never get a huge page: they share
// chunks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace ember {

// `bytes` bytes aligned to 64, uninitialised, valid while the returned pointer or a copy of it
// lives (a chunk is unmapped when the last buffer carved from it is released). Throws
// std::bad_alloc when the address space cannot be had. Under AddressSanitizer it is a plain heap
// allocation, so out-of-bounds reads of a packed matrix are still caught.
std::shared_ptr<uint8_t> AllocateOnHugePages(size_t bytes);

// The kernel's transparent-huge-page mode, the bracketed word of `enabled_file`'s text
// ("always [madvise] never" -> "madvise"): "always" and "madvise" give the advised memory
// (the weights above, the KV pool) huge pages, "never" does not; "" where the file is missing
// or says something else (a kernel without THP).
std::string TransparentHugePageMode(const char* enabled_file = "/sys/kernel/mm/transparent_hugepage/enabled");
std::string ParseTransparentHugePageMode(std::string_view enabled_text);

}  // namespace ember
