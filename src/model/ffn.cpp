// The SiTU MLP: the dense FFN of layer 0 and the fused shared experts of
// every MoE layer (docs/design/engine.md).
#include "kernels/ops.h"
#include "model/layers.h"
#include "model/matrix_ops.h"

namespace deltafin::layers {

void situ_mlp(const ModelConfig& cfg, const Matrix& gate, const Matrix& up, const Matrix& down, const float* x,
              size_t T, float* out, Workspace& ws, ThreadPool* pool) {
  const size_t I = size_t(gate.rows);
  float* g = ws.ffn_gate.take(T * I);
  float* u = ws.ffn_up.take(T * I);
  ops::matmul_group({{&gate, g}, {&up, u}}, x, T, pool);
  pool->parallel_for(T * I, 256, [&](size_t b, size_t e) {
    ops::situ_rows(g + b, u + b, e - b, cfg.situ_beta, cfg.situ_linear_beta, g + b);
  });
  ops::matmul(down, g, T, out, pool);
}

}  // namespace deltafin::layers
