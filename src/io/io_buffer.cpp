#include "io/io_buffer.h"

#include <sys/mman.h>

#include <cstdlib>

namespace deltafin::io {

uint8_t* alloc_io_buffer(size_t bytes) {
  if (bytes < (size_t(1) << 20)) return static_cast<uint8_t*>(std::aligned_alloc(4096, (bytes + 4095) / 4096 * 4096));
  const size_t size = (bytes + kHugePage - 1) / kHugePage * kHugePage;
  void* p = std::aligned_alloc(kHugePage, size);
  // Advice only: without transparent huge pages the buffer still works, in 4 KiB pages.
  if (p) (void)::madvise(p, size, MADV_HUGEPAGE);
  return static_cast<uint8_t*>(p);
}

void free_io_buffer(uint8_t* p) { std::free(p); }

}  // namespace deltafin::io
