// The gated MLP: K3's SiTU MLP (its dense layer 0 and the fused shared experts
// of every MoE layer, docs/design/engine.md) and Qwen3's SiLU-gated MLP.
#include "kernels/ops.h"
#include "model/layers.h"
#include "model/matrix_ops.h"

namespace deltafin::layers {

void gated_mlp(const ModelConfig& cfg, const Matrix& gate, const Matrix& up, const Matrix& down, const float* x,
              size_t T, float* out, Workspace& ws, ThreadPool* pool) {
  const size_t I = size_t(gate.rows);
  float* g = ws.ffn_gate.take(T * I);
  float* u = ws.ffn_up.take(T * I);
  ops::matmul_group({{&gate, g}, {&up, u}}, x, T, pool);
  pool->parallel_for(T * I, 256, [&](size_t b, size_t e) {
    if (cfg.activation == Activation::SiTU)
      ops::situ_rows(g + b, u + b, e - b, cfg.situ_beta, cfg.situ_linear_beta, g + b);
    else
      ops::silu_glu_rows(g + b, u + b, e - b, g + b);
  });
  ops::matmul(down, g, T, out, pool);
}

}  // namespace deltafin::layers
