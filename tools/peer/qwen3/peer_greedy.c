// Greedy decoding on token ids with llama.cpp, for exactness checks against Deltafin.
// Prints one generated id per line; optionally writes each decided step's fp32 logits
// (raw little-endian, [steps][n_vocab]) like `deltafin run --dump-logits`.
// No sampler: argmax with ties to the lowest id; end-of-generation tokens do not stop it.
// KV cache f32 and flash attention off by default, so the CPU path stays in f32.
// Usage: peer_greedy MODEL.gguf IDS(a,b,c) N_NEW THREADS [LOGITS_OUT|-] [kv=f32|f16] [fa=0|1] [probe=LAYER] [trace=FILE]
//   probe=L: check layer L's routing is experts 0..k-1 with weights exactly 1/k (see dense_as_moe.py)
//   trace=FILE: the experts chosen per MoE layer and position, as JSON lines like `deltafin run --route-trace`
#include "llama.h"
#include "ggml.h"
#include "ggml-backend.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void quiet(enum ggml_log_level level, const char * text, void * ud) {
    (void) ud;
    if (level >= GGML_LOG_LEVEL_WARN) fputs(text, stderr);
}

// probe=L: check every row of MoE layer L's chosen experts and normalised weights (for a dense layer
// re-expressed as experts 0..k-1 with weight exactly 1/k each); print the first row and a summary.
static char probe_topk[64], probe_w[64];
static FILE * trace_f;            // trace=FILE: {"pos","layer","experts"} per MoE layer and token
static long trace_pos[256];       // next position per layer (rows arrive in token order)
static long probe_rows[2], probe_bad[2];
static bool probe_cb(struct ggml_tensor * t, bool ask, void * ud) {
    (void) ud;
    int which = strcmp(t->name, probe_topk) == 0 ? 0 : strcmp(t->name, probe_w) == 0 ? 1 : -1;
    int layer = -1;
    if (trace_f && strncmp(t->name, "ffn_moe_topk-", 13) == 0) layer = atoi(t->name + 13);
    if (ask) return which >= 0 || layer >= 0;
    if (layer >= 0 && layer < 256) {
        void * tb = malloc(ggml_nbytes(t));
        ggml_backend_tensor_get(t, tb, 0, ggml_nbytes(t));
        for (int64_t r = 0; r < ggml_nelements(t) / t->ne[0]; r++) {
            fprintf(trace_f, "{\"pos\":%ld,\"layer\":%d,\"experts\":[", trace_pos[layer]++, layer);
            for (int64_t i = 0; i < t->ne[0]; i++)
                fprintf(trace_f, "%s%d", i ? "," : "", *(int32_t *) ((char *) tb + r * t->nb[1] + i * 4));
            fputs("]}\n", trace_f);
        }
        free(tb);
    }
    if (which < 0) return true;
    // both are [n_expert_used, n_tokens] here; the top-k may be a strided view of a wider argsort
    int64_t k = t->ne[0], rows = ggml_nelements(t) / k;
    GGML_ASSERT(ggml_n_dims(t) <= 2 && t->nb[0] == 4);
    void * buf = malloc(ggml_nbytes(t));
    ggml_backend_tensor_get(t, buf, 0, ggml_nbytes(t));
    for (int64_t r = 0; r < rows; r++) {
        unsigned seen = 0;
        int bad = 0;
        for (int64_t i = 0; i < k; i++) {
            if (which == 0) { int32_t e = *(int32_t *) ((char *) buf + r * t->nb[1] + i * 4); if (e < 0 || e >= k) bad = 1; else seen |= 1u << e; }
            else if (*(float *) ((char *) buf + r * t->nb[1] + i * 4) != 1.0f / (float) k) bad = 1;
        }
        if (which == 0 && seen != (1u << k) - 1) bad = 1;
        if (probe_rows[which] == 0 && r == 0) {
            fprintf(stderr, "%s first row:", t->name);
            for (int64_t i = 0; i < k; i++) {
                if (which == 0) fprintf(stderr, " %d", ((int32_t *) buf)[i]);
                else fprintf(stderr, " %.9g", ((float *) buf)[i]);
            }
            fputc('\n', stderr);
        }
        probe_bad[which] += bad;
    }
    probe_rows[which] += rows;
    free(buf);
    return true;
}

int main(int argc, char ** argv) {
    if (argc < 5) {
        fprintf(stderr, "usage: %s MODEL.gguf IDS N_NEW THREADS [LOGITS_OUT|-] [kv=f32|f16] [fa=0|1] [probe=LAYER] [trace=FILE]\n", argv[0]);
        return 2;
    }
    const char * path = argv[1];
    int n_new = atoi(argv[3]), n_threads = atoi(argv[4]);
    const char * logits_out = argc > 5 && strcmp(argv[5], "-") != 0 ? argv[5] : NULL;
    enum ggml_type kv = GGML_TYPE_F32;
    int fa = 0, probe = -1;
    for (int i = 6; i < argc; i++) {
        if (strcmp(argv[i], "kv=f16") == 0) kv = GGML_TYPE_F16;
        else if (strcmp(argv[i], "kv=f32") == 0) kv = GGML_TYPE_F32;
        else if (strncmp(argv[i], "fa=", 3) == 0) fa = atoi(argv[i] + 3);
        else if (strncmp(argv[i], "probe=", 6) == 0) probe = atoi(argv[i] + 6);
        else if (strncmp(argv[i], "trace=", 6) == 0) {
            trace_f = fopen(argv[i] + 6, "w");
            if (!trace_f) { fprintf(stderr, "cannot write %s\n", argv[i] + 6); return 2; }
        }
        else { fprintf(stderr, "unknown option %s\n", argv[i]); return 2; }
    }

    int cap = 4096, n_prompt = 0;
    llama_token * toks = malloc(sizeof(llama_token) * cap);
    for (char * s = argv[2]; *s;) {
        char * end;
        long v = strtol(s, &end, 10);
        if (end == s || n_prompt >= cap) { fprintf(stderr, "bad ids\n"); return 2; }
        toks[n_prompt++] = (llama_token) v;
        s = *end == ',' ? end + 1 : end;
    }

    llama_log_set(quiet, NULL);
    llama_backend_init();
    struct llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = 0;
    struct llama_model * model = llama_model_load_from_file(path, mp);
    if (!model) { fprintf(stderr, "cannot load %s\n", path); return 1; }
    const int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));

    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = n_prompt + n_new + 16;
    cp.n_batch = cp.n_ubatch = n_prompt > 512 ? n_prompt : 512;
    cp.n_threads = cp.n_threads_batch = n_threads;
    cp.type_k = cp.type_v = kv;
    cp.flash_attn_type = fa ? LLAMA_FLASH_ATTN_TYPE_ENABLED : LLAMA_FLASH_ATTN_TYPE_DISABLED;
    cp.no_perf = true;
    if (trace_f) cp.cb_eval = probe_cb;
    if (probe >= 0) {
        snprintf(probe_topk, sizeof probe_topk, "ffn_moe_topk-%d", probe);
        snprintf(probe_w, sizeof probe_w, "ffn_moe_weights_norm-%d", probe);
        cp.cb_eval = probe_cb;
    }
    struct llama_context * ctx = llama_init_from_model(model, cp);
    if (!ctx) { fprintf(stderr, "cannot create context\n"); return 1; }

    FILE * lf = logits_out ? fopen(logits_out, "wb") : NULL;
    if (logits_out && !lf) { fprintf(stderr, "cannot write %s\n", logits_out); return 1; }

    struct llama_batch batch = llama_batch_get_one(toks, n_prompt);
    llama_token next;
    for (int step = 0; step < n_new; step++) {
        if (llama_decode(ctx, batch) != 0) { fprintf(stderr, "decode failed at step %d\n", step); return 1; }
        const float * lg = llama_get_logits_ith(ctx, -1);
        if (lf && fwrite(lg, sizeof(float), (size_t) n_vocab, lf) != (size_t) n_vocab) { fprintf(stderr, "write failed\n"); return 1; }
        next = 0;
        for (int j = 1; j < n_vocab; j++) if (lg[j] > lg[next]) next = j;
        printf("%d\n", next);
        fflush(stdout);
        batch = llama_batch_get_one(&next, 1);
    }
    if (lf) fclose(lf);
    if (trace_f) fclose(trace_f);
    if (probe >= 0) {
        fprintf(stderr, "probe layer %d: %ld rows, %ld not experts {0..k-1}; %ld rows, %ld with a weight != 1/k\n",
                probe, probe_rows[0], probe_bad[0], probe_rows[1], probe_bad[1]);
    }
    llama_free(ctx);
    llama_model_free(model);
    llama_backend_free();
    free(toks);
    return 0;
}
