// Memory for O_DIRECT reads. Large buffers are 2 MiB-aligned and advised as
// transparent huge pages: the block layer builds one scatter-gather segment
// per physically contiguous run, so a 3 MB read into 4 KiB pages becomes ~750
// segments (split into many device requests where the queue's segment limit
// is low, as on virtio disks), into huge pages 2-3. On this project's VM that
// alone took random 3 MB O_DIRECT reads from 1.1 to 2.8 GB/s
// (docs/design/store-and-read-engine.md). Small buffers are plain 4 KiB-aligned allocations.
#pragma once
#include <cstddef>
#include <cstdint>

namespace deltafin::io {

constexpr size_t kHugePage = size_t(2) << 20;

// At least `bytes` of 4 KiB-aligned memory (2 MiB-aligned and huge-page
// advised from 1 MiB up); nullptr when out of memory. Free with free_io_buffer.
uint8_t* alloc_io_buffer(size_t bytes);
void free_io_buffer(uint8_t* p);

}  // namespace deltafin::io
