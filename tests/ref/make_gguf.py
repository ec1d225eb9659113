#!/usr/bin/env python3
"""make_gguf.py: write small random-weight GGUF models for strata's tests.

Usage: tests/.venv/bin/python tests/ref/make_gguf.py [OUT_DIR]
       (OUT_DIR defaults to tests/fixtures/models)

Writes rand-llama.gguf, rand-qwen2.gguf, rand-qwen3.gguf, rand-gemma3.gguf, two
RoPE-scaling variants, rand-llama-linear.gguf and rand-qwen2-yarn.gguf, and the mixtures of
experts rand-qwen3moe.gguf, rand-qwen3moe-q8_0.gguf, rand-gptoss.gguf, rand-gptoss-mxfp4.gguf
and rand-qwen2moe.gguf (at the end of this header).
Every file is a pure function of this script (fixed seeds, fixed metadata,
GGUF v3, 32-byte alignment): running it twice gives byte-identical files.
All weights are F32 (except the experts of rand-qwen3moe-q8_0 and rand-gptoss-mxfp4). Matrices have std 1/sqrt(fan_in) (attn_output and
ffn_down of llama/qwen2/qwen3: 2/sqrt(fan_in), so that the blocks, not the
tied input embedding, decide the logits); norm weights are 1 + 0.1*N(0,1)
(rand-gemma3's output_norm: 4 times that); the output matrix (or the tied
embedding) is scaled so that logits have a standard deviation of ~4.

Tensor layout convention (as in every GGUF): a tensor listed below as
"[ne0, ne1]" is stored row-major as ne1 rows of ne0 floats, i.e. a matrix
W[out][in] with ne0 = in, ne1 = out; y = W x. token_embd is [dim, n_vocab]:
row t is the embedding of token t.

--------------------------------------------------------------------------
Metadata common to all four ({A} = the architecture name)
  general.architecture            string  {A}
  general.name                    string  rand-{A}
  general.file_type               uint32  0 (all F32)
  {A}.context_length              uint32  2048
  {A}.embedding_length            uint32  dim
  {A}.block_count                 uint32  n_layer
  {A}.feed_forward_length         uint32  n_ff
  {A}.attention.head_count        uint32  n_head
  {A}.attention.head_count_kv     uint32  n_head_kv
  {A}.attention.layer_norm_rms_epsilon float32 eps
  {A}.rope.freq_base              float32 rope base (of the global layers for gemma3)
  {A}.vocab_size                  uint32  n_vocab (= length of tokenizer.ggml.tokens)
  tokenizer.ggml.*                the tokenizer (see below)

Tensors common to all four (per layer i = 0..n_layer-1, "blk.{i}."):
  token_embd.weight          [dim, n_vocab]
  output_norm.weight         [dim]
  blk.{i}.attn_norm.weight   [dim]
  blk.{i}.attn_q.weight      [dim, n_head*head_dim]
  blk.{i}.attn_k.weight      [dim, n_head_kv*head_dim]
  blk.{i}.attn_v.weight      [dim, n_head_kv*head_dim]
  blk.{i}.attn_output.weight [n_head*head_dim, dim]
  blk.{i}.ffn_norm.weight    [dim]
  blk.{i}.ffn_gate.weight    [dim, n_ff]
  blk.{i}.ffn_up.weight      [dim, n_ff]
  blk.{i}.ffn_down.weight    [n_ff, dim]
  output.weight              [dim, n_vocab]  only where untied (rand-llama);
                             when absent the logits use token_embd.weight.

Shared forward pass (pre-norm decoder; x = residual stream [dim]):
  x = token_embd[tok]                                   (gemma3: * sqrt(dim), see below)
  per layer:
    h = rmsnorm(x) * attn_norm          rmsnorm(v) = v / sqrt(mean(v^2) + eps)
    q = Wq h, k = Wk h, v = Wv h        (+ biases for qwen2)
    (qwen3, gemma3: q, k rmsnorm'ed per head over head_dim, times attn_{q,k}_norm)
    rope on q and k (all head_dim dims rotated, n_rot = head_dim); theta_j =
      pos * base^(-2j/head_dim), j = 0..head_dim/2-1; the pair rotated is
      llama:                (x[2j], x[2j+1])            ("normal" rope)
      qwen2, qwen3, gemma3: (x[j], x[j + head_dim/2])   ("neox" rope)
      (x', y') = (x cos - y sin, x sin + y cos)
    head h uses KV head h / (n_head / n_head_kv) (grouped-query attention)
    att = softmax(q.k * scale + causal mask) v, scale = 1/sqrt(head_dim)
    o = Wo att
    llama/qwen2/qwen3:  x = x + o;  x = x + Wdown(silu(Wgate g) * (Wup g)), g = rmsnorm(x)*ffn_norm
    gemma3:             see below (sandwich norms, GeGLU)
  logits = Wout (rmsnorm(x) * output_norm)

--------------------------------------------------------------------------
rand-llama  (arch "llama")  dim 64, 3 layers, 4 heads / 2 KV heads, head_dim 16,
  n_ff 160, eps 1e-5, rope base 10000, untied output.weight.
  Extra metadata: llama.rope.dimension_count uint32 16 (= head_dim; llama.cpp
  insists on n_rot == head_dim for llama).
  Tokenizer: SentencePiece ("llama"), the 512-token vocab of stories260K.gguf
  (tokenizer.ggml.model/tokens/scores/token_type/bos/eos/unknown ids copied).
  BOS added (tokenizer.ggml.add_bos_token true).

rand-qwen2  (arch "qwen2")  dim 64, 3 layers, 4 heads / 2 KV heads, head_dim 16,
  n_ff 160, eps 1e-6, rope base 1000000, tied embeddings (no output.weight).
  Extra tensors: blk.{i}.attn_q.bias [n_head*head_dim], blk.{i}.attn_k.bias
  [n_head_kv*head_dim], blk.{i}.attn_v.bias [n_head_kv*head_dim]; added to
  Wq h, Wk h, Wv h before rope.
  Tokenizer: byte-level BPE ("gpt2", pre "gpt-2"), 512 tokens: the 256
  byte tokens + the first 253 merges of GPT-2 (ids 0..508, same ids as GPT-2),
  then <|endoftext|> 509 (bos = eos = 509), <|im_start|> 510, <|im_end|> 511
  (token_type 3 = control); tokenizer.ggml.merges = those 253 merges.
  No BOS added (tokenizer.ggml.add_bos_token false).

rand-qwen3  (arch "qwen3")  dim 64, 3 layers, 4 heads / 2 KV heads, head_dim 32
  (so n_head*head_dim = 128 != dim), n_ff 160, eps 1e-6, rope base 1000000,
  tied embeddings.
  Extra metadata: qwen3.attention.key_length uint32 32,
                  qwen3.attention.value_length uint32 32.
  Extra tensors: blk.{i}.attn_q_norm.weight [head_dim], blk.{i}.attn_k_norm.weight
  [head_dim]: after the projections, each head of q and of k is rmsnorm'ed over
  its head_dim values (eps as above) and multiplied by these weights, then roped.
  No biases. Tokenizer: as rand-qwen2.

rand-gemma3 (arch "gemma3") dim 64, 6 layers, 4 heads / 2 KV heads, head_dim 32,
  n_ff 128, eps 1e-6, tied embeddings.
  Extra metadata: gemma3.attention.key_length uint32 32,
                  gemma3.attention.value_length uint32 32,
                  gemma3.attention.sliding_window uint32 32,
                  gemma3.rope.freq_base float32 1000000 (global layers).
  Deliberately absent, as in the real Gemma 3 270M file, so the defaults apply:
    gemma3.attention.sliding_window_pattern -> pattern 6: layer il is a local
      (sliding-window) layer iff il % 6 < 5, i.e. layers 0-4 local, layer 5 global
      (the real 18-layer model: 5, 11, 17 global);
    gemma3.rope.freq_base_swa -> local layers use rope base 10000.
  Local layers: query at position p attends to keys at positions k with
    p - window < k <= p (window = sliding_window = 32 keys, itself included).
  Extra tensors: blk.{i}.attn_q_norm.weight [head_dim], blk.{i}.attn_k_norm.weight
  [head_dim] (as qwen3), blk.{i}.post_attention_norm.weight [dim],
  blk.{i}.post_ffw_norm.weight [dim].
  Forward pass differences:
    x = token_embd[tok] * sqrt(dim)            (f32 sqrtf(64) = 8 here)
    q = q_norm(Wq h), k = k_norm(Wk h), rope (neox) with the layer's base
    q scaled by 1/sqrt(head_dim) before attention (attention scale then 1)
    x = x + rmsnorm(Wo att) * post_attention_norm
    g = rmsnorm(x) * ffn_norm
    x = x + rmsnorm(Wdown(gelu(Wgate g) * (Wup g))) * post_ffw_norm
    gelu = tanh approximation 0.5 v (1 + tanh(sqrt(2/pi) (v + 0.044715 v^3)));
    (llama.cpp's CPU backend evaluates it through an f16 lookup table: input
    rounded to f16, result rounded to f16, so expect ~1e-3 relative noise there.)
    No final logit soft-capping (gemma3.final_logit_softcapping absent).
  Norm weights are stored as the final multipliers (the GGUF converter already
  added Gemma's "1 +"), so they are used exactly like the other archs' norms.
  Tokenizer: as rand-llama (stories260K SPM, 512), add_bos_token true.

--------------------------------------------------------------------------
RoPE-scaling variants: the same weights as their base model (same seed, same tensors,
same tokenizer); general.name is the variant's name and these keys are added after
{A}.vocab_size (and {A}.rope.freq_base may differ, see below):

rand-llama-linear  (arch "llama", base rand-llama)
  llama.rope.scaling.type    string  "linear"
  llama.rope.scaling.factor  float32 4
  Linear interpolation: every angle is computed at position pos / 4, i.e.
  theta_j = (pos * freq_scale) * base^(-2j/head_dim), freq_scale = 1/factor = 0.25.

rand-qwen2-yarn  (arch "qwen2", base rand-qwen2, but rope base 10000 instead of 1e6 so
  that the slow dims turn enough over 1024 positions for the scaling to show)
  qwen2.rope.freq_base                       float32 10000
  qwen2.rope.scaling.type                    string  "yarn"
  qwen2.rope.scaling.factor                  float32 4
  qwen2.rope.scaling.original_context_length uint32  256
  (context_length stays 2048; long.txt's 1024 tokens go well past the original 256.)
  llama.cpp (0.3.36's vendored tree) reads for any arch: rope.scaling.type (absent ->
  "linear"), rope.scaling.factor (or the old rope.scale_linear), rope.scaling.
  original_context_length (absent -> context_length), rope.scaling.attn_factor (absent
  -> 1); the yarn_ext_factor / yarn_attn_factor / yarn_beta_fast / yarn_beta_slow /
  yarn_log_multiplier keys exist but only some other archs (grok, mistral3, deepseek2)
  read them, not llama or qwen2. So for qwen2 the YaRN parameters are the defaults:
  ext_factor 1 (type yarn), beta_fast 32, beta_slow 1, and the magnitude scale
  mscale = attn_factor * (1 + 0.1 ln(factor)) (llama.cpp passes attn_factor *
  get_mscale(factor) / (1 + 0.1 ln factor) to ggml, whose rope multiplies by
  1 + 0.1 ln(1/freq_scale) again: the same up to f32 rounding).
  YaRN angles, with n = head_dim = 16, j = 0..n/2-1, theta_e = pos * base^(-2j/n):
    corr(b) = n * ln(n_ctx_orig / (2 pi b)) / (2 ln base)
    low = max(0, floor(corr(beta_fast))), high = min(n - 1, ceil(corr(beta_slow)))
          (here low = 0, high = 4)
    ramp_j = 1 - clamp((j - low) / max(0.001, high - low), 0, 1)   (mix = ramp * ext_factor)
    theta_j = theta_e * freq_scale * (1 - mix) + theta_e * mix
    (cos, sin) of theta_j, both multiplied by mscale (= 1.1386 here), applied to q and k.

--------------------------------------------------------------------------
Mixture of experts:

rand-qwen3moe (arch "qwen3moe") attention as rand-qwen3 (dim 64, 4 heads / 2 KV heads,
  head_dim 32, QK-norm, neox rope base 1e6, eps 1e-6, tied embeddings, the BPE tokenizer) but
  2 layers; every layer's FFN is a mixture of 8 experts of width 32, top 2.
  Extra metadata: qwen3moe.attention.key_length / value_length uint32 32,
                  qwen3moe.expert_count uint32 8, qwen3moe.expert_used_count uint32 2,
                  qwen3moe.expert_feed_forward_length uint32 32
                  (qwen3moe.feed_forward_length is written as 96 and is NOT the expert width:
                  a reader must take expert_feed_forward_length).
  Per layer, instead of ffn_gate / ffn_up / ffn_down:
    blk.{i}.ffn_gate_inp.weight  [dim, 8]        the router, std 2/sqrt(dim)
    blk.{i}.ffn_gate_exps.weight [dim, 32, 8]    expert e's gate matrix is slice e
    blk.{i}.ffn_up_exps.weight   [dim, 32, 8]
    blk.{i}.ffn_down_exps.weight [32, dim, 8]    (std 2/sqrt(32), as the dense ffn_down)
  FFN per token (llama.cpp's qwen3moe): g = rmsnorm(x) * ffn_norm; p = softmax(W_inp g);
    e0, e1 = the two largest p (e0 first); w_j = p[e_j] / (p[e0] + p[e1]);
    x = x + w0 * Down_e0(silu(Gate_e0 g) * (Up_e0 g)) + w1 * Down_e1(...).

rand-qwen3moe-q8_0  the same model (same seed, same values drawn) with the three expert
  tensors of every layer quantised to Q8_0 by gguf.quants.quantize (the router and everything
  else F32, as llama.cpp's quantizer keeps ffn_gate_inp); general.file_type 7.

rand-gptoss (arch "gpt-oss", llama.cpp's openai-moe graph) dim 64, 2 layers, 4 heads / 2 KV
  heads, head_dim 32, eps 1e-5, neox rope base 10000 with YaRN x4 from an original context of
  256 (as rand-qwen2-yarn, in BOTH layers), untied output.weight, the BPE tokenizer; every
  layer's FFN a mixture of 8 experts of width 32, top 2.
  Metadata: gpt-oss.attention.key_length / value_length 32, expert_count 8, expert_used_count 2,
  expert_feed_forward_length 32 (feed_forward_length 96 is not used),
  gpt-oss.attention.sliding_window 16, rope.scaling.{type yarn, factor 4,
  original_context_length 256}. Absent, so llama.cpp's defaults apply:
    gpt-oss.attention.sliding_window_pattern -> 2: layer il slides iff il % 2 < 1, i.e. layer 0
      slides (query p sees keys p-16 < k <= p), layer 1 sees every earlier key;
    gpt-oss.rope.freq_base_swa -> the sliding layer uses the same base (and the same YaRN).
  Per layer, instead of ffn_norm / ffn_gate / ffn_up / ffn_down:
    blk.{i}.attn_{q,k,v}.bias          as qwen2's, 0.2 N(0,1)
    blk.{i}.attn_output.bias   [dim]   0.2 N(0,1), added after Wo
    blk.{i}.attn_sinks.weight  [4]     1 + N(0,1): one logit per query head
    blk.{i}.post_attention_norm.weight [dim]   the FFN's input norm (gpt-oss's name for it)
    blk.{i}.ffn_gate_inp.weight [dim, 8] (std 2/sqrt(dim)), ffn_gate_inp.bias [8] 0.5 N(0,1)
    blk.{i}.ffn_gate_exps.weight / ffn_up_exps.weight [dim, 32, 8] with std 3/sqrt(dim), so
      that the SwiGLU's clamp at 7 is reached; ffn_down_exps.weight [32, dim, 8] std 1/sqrt(32)
    blk.{i}.ffn_gate_exps.bias / ffn_up_exps.bias [32, 8] 0.5 N(0,1), ffn_down_exps.bias
      [dim, 8] 0.2 N(0,1)
  Forward pass per layer:
    h = rmsnorm(x) * attn_norm; q, k, v = W h + b; rope (neox, YaRN); per head h:
      s_j = q.k_j / sqrt(32) over the visible keys j, plus the sink z_h as one more logit:
      a = sum_j softmax(s_1..s_n, z_h)_j v_j   (the sink takes weight but has no value)
    x = x + Wo a + bo
    g = rmsnorm(x) * post_attention_norm; z = W_inp g + b_inp
    e0, e1 = the two largest z (e0 first); (w0, w1) = softmax(z[e0], z[e1])
    per expert: gate = Gate_e g + bg_e, up = Up_e g + bu_e, c = min(gate, 7),
      h = c * sigmoid(1.702 c) * (clamp(up, -7, 7) + 1), D_e = Down_e h + bd_e
    x = x + w0 D_e0 + w1 D_e1
  logits = output . (rmsnorm(x) * output_norm)

rand-gptoss-mxfp4  the same model with the three expert weight tensors of every layer
  quantised to MXFP4 by gguf.quants.quantize (biases and everything else F32);
  general.file_type 38.

rand-qwen2moe (arch "qwen2moe") attention as rand-qwen2 (dim 64, 4 heads / 2 KV heads,
  head_dim 16, Q/K/V biases, neox rope base 1e6, eps 1e-6) but 2 layers, an untied
  output.weight (llama.cpp requires it for qwen2moe), the BPE tokenizer; every layer's FFN:
  8 experts of width 32, top 2 (as rand-qwen3moe: ffn_gate_inp, ffn_{gate,up,down}_exps), and a
  shared expert of width 64.
  Metadata: qwen2moe.expert_count 8, expert_used_count 2, expert_feed_forward_length 32,
  expert_shared_feed_forward_length 64 (feed_forward_length 96 is not used).
  Extra tensors per layer:
    blk.{i}.ffn_gate_inp_shexp.weight [dim]        the shared expert's gate, std 2/sqrt(dim)
    blk.{i}.ffn_gate_shexp.weight / ffn_up_shexp.weight [dim, 64], ffn_down_shexp.weight
      [64, dim] (std 2/sqrt(64))
  FFN per token (llama.cpp's qwen2moe): g = rmsnorm(x) * ffn_norm; p = softmax(W_inp g);
    e0, e1 = the two largest p (e0 first); the weights are p[e0], p[e1] themselves (NOT
    renormalised to sum 1);
    x = x + p[e0] Down_e0(silu(Gate_e0 g) * (Up_e0 g)) + p[e1] Down_e1(...)
          + sigmoid(ffn_gate_inp_shexp . g) * Down_sh(silu(Gate_sh g) * (Up_sh g)).
--------------------------------------------------------------------------
Hybrid linear attention (docs/DESIGN.md §3.1.3):

rand-qwen35 (arch "qwen35") dim 64, 4 layers, full attention every 2nd layer (layers 1, 3; layers
  0, 2 Gated-DeltaNet linear attention), n_ff 128, eps 1e-6, tied embeddings, the BPE tokenizer.
  Attention layers: 4 heads / 2 KV heads, head_dim 32, partial RoPE on the first 8 dims of each
  head (neox pairs), base 1e7, sections [2, 1, 1, 0] (llama.cpp's interleaved M-RoPE; for text
  every pair gets the position); attn_q gives per head 32 queries then 32 gates; the attention
  output is multiplied by sigmoid(gate) before attn_output.
  Linear layers: 2 key heads, 4 value heads, head dim 16 (both), conv kernel 4.
  Metadata: qwen35.attention.key_length / value_length 32, qwen35.rope.dimension_count 8,
    qwen35.rope.dimension_sections int32[4] [2, 1, 1, 0], qwen35.full_attention_interval 2,
    qwen35.ssm.conv_kernel 4, ssm.state_size 16, ssm.group_count 2, ssm.time_step_rank 4,
    ssm.inner_size 64.
  Tensors per layer: attn_norm [dim], post_attention_norm [dim] (the FFN's input norm),
    ffn_gate / ffn_up / ffn_down as the dense archs; attention layers attn_q [dim, 2*4*32],
    attn_k / attn_v [dim, 2*32], attn_q_norm / attn_k_norm [32], attn_output [4*32, dim];
    linear layers attn_qkv [dim, 128] (q 2x16 | k 2x16 | v 4x16), attn_gate [dim, 64] (z),
    ssm_beta / ssm_alpha [dim, 4], ssm_dt.bias [4], ssm_a [4] (= -exp(A_log), A_log uniform in
    [-1, 1]), ssm_conv1d [4, 128], ssm_norm [16], ssm_out [64, dim].
  The linear layer, per token: kernels/backend.h and docs/DESIGN.md §3.1.3.

rand-qwen35moe (arch "qwen35moe") rand-qwen35's layers (its own seed) with every FFN a mixture of
  6 experts of width 16, top 2, as rand-qwen3moe (softmax router, renormalised weights), plus a
  shared expert of width 32 gated per token by sigmoid(ffn_gate_inp_shexp . g):
    x = x + Σ_j w_j Down_ej(silu(Gate_ej g) * (Up_ej g)) + sigmoid(s . g) * Dsh(silu(Gsh g) * (Ush g))
  Extra metadata: qwen35moe.expert_count 6, expert_used_count 2, expert_feed_forward_length 16,
    expert_shared_feed_forward_length 32 (feed_forward_length absent).
  Tensors instead of ffn_gate / ffn_up / ffn_down: ffn_gate_inp [dim, 6], ffn_gate_exps /
    ffn_up_exps [dim, 16, 6], ffn_down_exps [16, dim, 6], ffn_gate_inp_shexp [dim],
    ffn_gate_shexp / ffn_up_shexp [dim, 32], ffn_down_shexp [32, dim].
"""
import math
import os
import sys

import numpy as np
import gguf

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
FIX = os.path.join(REPO, "tests", "fixtures")
STORIES = os.environ.get("STRATA_STORIES", os.path.join(FIX, "models", "stories260K.gguf"))
GPT2_VOCAB = os.environ.get("STRATA_GPT2_VOCAB",
                            os.path.join(FIX, "tokenizer", "ggml-vocab-gpt-2.gguf"))

ARCHS = {
    "llama":  dict(dim=64, n_layer=3, n_head=4, n_head_kv=2, head_dim=16, n_ff=160,
                   eps=1e-5, rope_base=10000.0, tied=False, tok="spm", seed=1001, res_gain=2.0),
    "qwen2":  dict(dim=64, n_layer=3, n_head=4, n_head_kv=2, head_dim=16, n_ff=160,
                   eps=1e-6, rope_base=1000000.0, tied=True, tok="bpe", seed=1002, res_gain=2.0),
    "qwen3":  dict(dim=64, n_layer=3, n_head=4, n_head_kv=2, head_dim=32, n_ff=160,
                   eps=1e-6, rope_base=1000000.0, tied=True, tok="bpe", seed=1003, res_gain=2.0),
    "gemma3": dict(dim=64, n_layer=6, n_head=4, n_head_kv=2, head_dim=32, n_ff=128,
                   eps=1e-6, rope_base=1000000.0, tied=True, tok="spm", seed=1004, res_gain=1.0,
                   sliding_window=32),
    "qwen3moe": dict(dim=64, n_layer=2, n_head=4, n_head_kv=2, head_dim=32, n_ff=96,
                     eps=1e-6, rope_base=1000000.0, tied=True, tok="bpe", seed=1005, res_gain=2.0,
                     n_expert=8, n_expert_used=2, n_ff_exp=32, router_gain=2.0),
    "gpt-oss": dict(dim=64, n_layer=2, n_head=4, n_head_kv=2, head_dim=32, n_ff=96,
                    eps=1e-5, rope_base=10000.0, tied=False, tok="bpe", seed=1006, res_gain=1.0,
                    n_expert=8, n_expert_used=2, n_ff_exp=32, router_gain=2.0, sliding_window=16,
                    scaling="yarn", factor=4.0, orig_ctx=256),
    "qwen2moe": dict(dim=64, n_layer=2, n_head=4, n_head_kv=2, head_dim=16, n_ff=96,
                     eps=1e-6, rope_base=1000000.0, tied=False, tok="bpe", seed=1007, res_gain=2.0,
                     n_expert=8, n_expert_used=2, n_ff_exp=32, router_gain=2.0, n_ff_shexp=64),
}
# name -> (architecture, extra metadata); the variants keep their base arch's weights.
MODELS = {
    "rand-llama": ("llama", {}),
    "rand-qwen2": ("qwen2", {}),
    "rand-qwen3": ("qwen3", {}),
    "rand-gemma3": ("gemma3", {}),
    "rand-llama-linear": ("llama", dict(rope_base=10000.0, scaling="linear", factor=4.0)),
    "rand-qwen2-yarn": ("qwen2", dict(rope_base=10000.0, scaling="yarn", factor=4.0,
                                      orig_ctx=256)),
    "rand-qwen3moe": ("qwen3moe", {}),
    "rand-qwen3moe-q8_0": ("qwen3moe", dict(expert_type="q8_0")),
    "rand-gptoss": ("gpt-oss", {}),
    "rand-gptoss-mxfp4": ("gpt-oss", dict(expert_type="mxfp4")),
    "rand-qwen2moe": ("qwen2moe", {}),
    "rand-qwen35": ("qwen35", {}),
    "rand-qwen35moe": ("qwen35moe", {}),
}
QWEN35 = dict(dim=64, n_layer=4, n_head=4, n_head_kv=2, head_dim=32, n_rot=8, sections=[2, 1, 1, 0],
              n_ff=128, eps=1e-6, rope_base=10000000.0, interval=2, conv=4, d_state=16, n_group=2,
              n_v=4, seed=1006, res_gain=2.0)
QWEN35MOE = dict(QWEN35, seed=1007, n_expert=6, n_expert_used=2, n_ff_exp=16, n_ff_shexp=32, router_gain=2.0)
N_BPE_MERGES = 253
BPE_SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]


def field(reader, key):
    f = reader.fields.get(key)
    if f is None:
        raise SystemExit(f"make_gguf.py: {key} missing from tokenizer source")
    return f.contents()


def spm_vocab():
    """The 512-token SentencePiece vocab of stories260K.gguf."""
    r = gguf.GGUFReader(STORIES)
    return dict(model="llama",
                tokens=field(r, "tokenizer.ggml.tokens"),
                scores=[float(s) for s in field(r, "tokenizer.ggml.scores")],
                types=[int(t) for t in field(r, "tokenizer.ggml.token_type")],
                bos=int(field(r, "tokenizer.ggml.bos_token_id")),
                eos=int(field(r, "tokenizer.ggml.eos_token_id")),
                unk=int(field(r, "tokenizer.ggml.unknown_token_id")))


def bpe_vocab():
    """A 512-token byte-level BPE vocab cut from GPT-2's: bytes + first merges + specials."""
    r = gguf.GGUFReader(GPT2_VOCAB)
    tokens = field(r, "tokenizer.ggml.tokens")
    merges = field(r, "tokenizer.ggml.merges")
    out_tokens = list(tokens[:256 + N_BPE_MERGES])
    out_merges = list(merges[:N_BPE_MERGES])
    for i, m in enumerate(out_merges):  # GPT-2: token 256+i is the result of merge i
        a, b = m.split(" ")
        assert out_tokens[256 + i] == a + b, (i, m, out_tokens[256 + i])
    eot = len(out_tokens)
    out_tokens += BPE_SPECIALS
    types = [1] * (256 + N_BPE_MERGES) + [3] * len(BPE_SPECIALS)
    return dict(model="gpt2", pre="gpt-2", tokens=out_tokens, merges=out_merges,
                types=types, bos=eot, eos=eot)


def add_tokenizer(w, tok, add_bos):
    w.add_string("tokenizer.ggml.model", tok["model"])
    if "pre" in tok:
        w.add_string("tokenizer.ggml.pre", tok["pre"])
    w.add_array("tokenizer.ggml.tokens", tok["tokens"])
    if "scores" in tok:
        w.add_array("tokenizer.ggml.scores", tok["scores"])
    w.add_array("tokenizer.ggml.token_type", tok["types"])
    if "merges" in tok:
        w.add_array("tokenizer.ggml.merges", tok["merges"])
    w.add_uint32("tokenizer.ggml.bos_token_id", tok["bos"])
    w.add_uint32("tokenizer.ggml.eos_token_id", tok["eos"])
    if "unk" in tok:
        w.add_uint32("tokenizer.ggml.unknown_token_id", tok["unk"])
    w.add_bool("tokenizer.ggml.add_bos_token", add_bos)
    w.add_bool("tokenizer.ggml.add_eos_token", False)


def mat(rng, n_out, n_in, gain=1.0):
    """W[out][in] with std gain/sqrt(n_in), stored as ne = [n_in, n_out]."""
    return (rng.standard_normal((n_out, n_in)) * (gain / math.sqrt(n_in))).astype(np.float32)


def norm_w(rng, n):
    return (1.0 + 0.1 * rng.standard_normal(n)).astype(np.float32)


def add_experts(w, rng, p, c, oss=False):
    """The MoE FFN: the router [dim, n_expert] (always F32, as llama.cpp's quantizer keeps
    it) and the stacked experts [dim, n_ff_exp, n_expert] (gate, up) and [n_ff_exp, dim,
    n_expert] (down), F32, Q8_0 or MXFP4 (gguf.quants.quantize) per c["expert_type"].
    oss (gpt-oss): gate and up with gain 3 (so that the SwiGLU's clamp at 7 is reached), down
    with gain 1, and the biases (F32): router [n_expert], gate and up [n_ff_exp, n_expert],
    down [dim, n_expert]."""
    dim, ne, nfe = c["dim"], c["n_expert"], c["n_ff_exp"]
    gu_gain = 3.0 if oss else 1.0
    w.add_tensor(p + "ffn_gate_inp.weight", mat(rng, ne, dim, c["router_gain"]))
    gate = np.stack([mat(rng, nfe, dim, gu_gain) for _ in range(ne)])
    up = np.stack([mat(rng, nfe, dim, gu_gain) for _ in range(ne)])
    down = np.stack([mat(rng, dim, nfe, c["res_gain"]) for _ in range(ne)])
    qtypes = {"q8_0": gguf.GGMLQuantizationType.Q8_0, "mxfp4": gguf.GGMLQuantizationType.MXFP4}
    for suffix, t in (("ffn_gate_exps", gate), ("ffn_up_exps", up), ("ffn_down_exps", down)):
        if c.get("expert_type") in qtypes:
            qt = qtypes[c["expert_type"]]
            w.add_tensor(p + suffix + ".weight", gguf.quants.quantize(t, qt), raw_dtype=qt)
        else:
            w.add_tensor(p + suffix + ".weight", t)
    if oss:
        w.add_tensor(p + "ffn_gate_inp.bias", (0.5 * rng.standard_normal(ne)).astype(np.float32))
        w.add_tensor(p + "ffn_gate_exps.bias", (0.5 * rng.standard_normal((ne, nfe))).astype(np.float32))
        w.add_tensor(p + "ffn_up_exps.bias", (0.5 * rng.standard_normal((ne, nfe))).astype(np.float32))
        w.add_tensor(p + "ffn_down_exps.bias", (0.2 * rng.standard_normal((ne, dim))).astype(np.float32))


def build_qwen35(name, out_path, A):
    """rand-qwen35 (A = "qwen35") and rand-qwen35moe (A = "qwen35moe"): see the header."""
    c = QWEN35 if A == "qwen35" else QWEN35MOE
    moe = A == "qwen35moe"
    rng = np.random.default_rng(c["seed"])
    dim, hd, nh, nkv, nff = c["dim"], c["head_dim"], c["n_head"], c["n_head_kv"], c["n_ff"]
    d, nk, nv = c["d_state"], c["n_group"], c["n_v"]
    cd = 2 * nk * d + nv * d
    tok = bpe_vocab()
    n_vocab = len(tok["tokens"])
    w = gguf.GGUFWriter(out_path, A)
    w.add_string("general.name", name)
    w.add_uint32("general.file_type", 0)
    w.add_uint32(f"{A}.context_length", 2048)
    w.add_uint32(f"{A}.embedding_length", dim)
    w.add_uint32(f"{A}.block_count", c["n_layer"])
    if moe:
        w.add_uint32(f"{A}.expert_count", c["n_expert"])
        w.add_uint32(f"{A}.expert_used_count", c["n_expert_used"])
        w.add_uint32(f"{A}.expert_feed_forward_length", c["n_ff_exp"])
        w.add_uint32(f"{A}.expert_shared_feed_forward_length", c["n_ff_shexp"])
    else:
        w.add_uint32(f"{A}.feed_forward_length", nff)
    w.add_uint32(f"{A}.attention.head_count", nh)
    w.add_uint32(f"{A}.attention.head_count_kv", nkv)
    w.add_uint32(f"{A}.attention.key_length", hd)
    w.add_uint32(f"{A}.attention.value_length", hd)
    w.add_float32(f"{A}.attention.layer_norm_rms_epsilon", c["eps"])
    w.add_float32(f"{A}.rope.freq_base", c["rope_base"])
    w.add_uint32(f"{A}.rope.dimension_count", c["n_rot"])
    w.add_array(f"{A}.rope.dimension_sections", list(c["sections"]))
    w.add_uint32(f"{A}.full_attention_interval", c["interval"])
    w.add_uint32(f"{A}.ssm.conv_kernel", c["conv"])
    w.add_uint32(f"{A}.ssm.state_size", d)
    w.add_uint32(f"{A}.ssm.group_count", nk)
    w.add_uint32(f"{A}.ssm.time_step_rank", nv)
    w.add_uint32(f"{A}.ssm.inner_size", nv * d)
    w.add_uint32(f"{A}.vocab_size", n_vocab)
    add_tokenizer(w, tok, add_bos=False)
    w.add_tensor("token_embd.weight", (rng.standard_normal((n_vocab, dim)) * (4.0 / math.sqrt(dim))).astype(np.float32))
    w.add_tensor("output_norm.weight", norm_w(rng, dim))
    for i in range(c["n_layer"]):
        p = f"blk.{i}."
        w.add_tensor(p + "attn_norm.weight", norm_w(rng, dim))
        if (i + 1) % c["interval"] == 0:   # full attention
            w.add_tensor(p + "attn_q.weight", mat(rng, 2 * nh * hd, dim))
            w.add_tensor(p + "attn_k.weight", mat(rng, nkv * hd, dim))
            w.add_tensor(p + "attn_v.weight", mat(rng, nkv * hd, dim))
            w.add_tensor(p + "attn_q_norm.weight", norm_w(rng, hd))
            w.add_tensor(p + "attn_k_norm.weight", norm_w(rng, hd))
            w.add_tensor(p + "attn_output.weight", mat(rng, dim, nh * hd, c["res_gain"]))
        else:                              # Gated DeltaNet
            w.add_tensor(p + "attn_qkv.weight", mat(rng, cd, dim))
            w.add_tensor(p + "attn_gate.weight", mat(rng, nv * d, dim))
            w.add_tensor(p + "ssm_beta.weight", mat(rng, nv, dim))
            w.add_tensor(p + "ssm_alpha.weight", mat(rng, nv, dim))
            w.add_tensor(p + "ssm_dt.bias", (0.5 * rng.standard_normal(nv)).astype(np.float32))
            w.add_tensor(p + "ssm_a", (-np.exp(rng.uniform(-1.0, 1.0, nv))).astype(np.float32))
            w.add_tensor(p + "ssm_conv1d.weight", mat(rng, cd, c["conv"]))
            w.add_tensor(p + "ssm_norm.weight", norm_w(rng, d))
            w.add_tensor(p + "ssm_out.weight", mat(rng, dim, nv * d, c["res_gain"]))
        w.add_tensor(p + "post_attention_norm.weight", norm_w(rng, dim))
        if moe:
            add_experts(w, rng, p, c)
            fs = c["n_ff_shexp"]
            w.add_tensor(p + "ffn_gate_inp_shexp.weight", (rng.standard_normal(dim) / math.sqrt(dim)).astype(np.float32))
            w.add_tensor(p + "ffn_gate_shexp.weight", mat(rng, fs, dim))
            w.add_tensor(p + "ffn_up_shexp.weight", mat(rng, fs, dim))
            w.add_tensor(p + "ffn_down_shexp.weight", mat(rng, dim, fs, c["res_gain"]))
            continue
        w.add_tensor(p + "ffn_gate.weight", mat(rng, nff, dim))
        w.add_tensor(p + "ffn_up.weight", mat(rng, nff, dim))
        w.add_tensor(p + "ffn_down.weight", mat(rng, dim, nff, c["res_gain"]))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def build(name, out_path):
    arch, extra = MODELS[name]
    if arch in ("qwen35", "qwen35moe"):
        return build_qwen35(name, out_path, arch)
    c = dict(ARCHS[arch], **extra)
    rng = np.random.default_rng(c["seed"])
    dim, hd, nh, nkv, nff = c["dim"], c["head_dim"], c["n_head"], c["n_head_kv"], c["n_ff"]
    tok = spm_vocab() if c["tok"] == "spm" else bpe_vocab()
    n_vocab = len(tok["tokens"])
    A = arch

    w = gguf.GGUFWriter(out_path, arch)  # writes general.architecture
    w.add_string("general.name", name)
    w.add_uint32("general.file_type", {"q8_0": 7, "mxfp4": 38}.get(c.get("expert_type"), 0))
    w.add_uint32(f"{A}.context_length", 2048)
    w.add_uint32(f"{A}.embedding_length", dim)
    w.add_uint32(f"{A}.block_count", c["n_layer"])
    w.add_uint32(f"{A}.feed_forward_length", nff)
    w.add_uint32(f"{A}.attention.head_count", nh)
    w.add_uint32(f"{A}.attention.head_count_kv", nkv)
    w.add_float32(f"{A}.attention.layer_norm_rms_epsilon", c["eps"])
    w.add_float32(f"{A}.rope.freq_base", c["rope_base"])
    w.add_uint32(f"{A}.vocab_size", n_vocab)
    if "scaling" in c:
        w.add_string(f"{A}.rope.scaling.type", c["scaling"])
        w.add_float32(f"{A}.rope.scaling.factor", c["factor"])
        if "orig_ctx" in c:
            w.add_uint32(f"{A}.rope.scaling.original_context_length", c["orig_ctx"])
    if arch == "llama":
        w.add_uint32(f"{A}.rope.dimension_count", hd)
    if arch in ("qwen3", "gemma3", "qwen3moe", "gpt-oss"):
        w.add_uint32(f"{A}.attention.key_length", hd)
        w.add_uint32(f"{A}.attention.value_length", hd)
    if arch in ("qwen3moe", "gpt-oss", "qwen2moe"):
        w.add_uint32(f"{A}.expert_count", c["n_expert"])
        w.add_uint32(f"{A}.expert_used_count", c["n_expert_used"])
        w.add_uint32(f"{A}.expert_feed_forward_length", c["n_ff_exp"])
    if arch == "qwen2moe":
        w.add_uint32(f"{A}.expert_shared_feed_forward_length", c["n_ff_shexp"])
    if arch in ("gemma3", "gpt-oss"):
        w.add_uint32(f"{A}.attention.sliding_window", c["sliding_window"])
    add_tokenizer(w, tok, add_bos=(c["tok"] == "spm"))

    # Logit scale: rmsnorm output has rms ~1, so logits ~ N(0, gain^2).
    # gemma3 multiplies the embedding by sqrt(dim) on input, so with the same
    # embedding scale the input token would dominate the residual stream and the
    # tied logits (argmax = input token). There the embedding gets std 1/8
    # (rms 1 after the sqrt(dim) scale) and output_norm ~4 restores the gain.
    logit_gain = 4.0
    if arch == "gemma3":
        embd = (0.125 * rng.standard_normal((n_vocab, dim))).astype(np.float32)
        out_norm = (4.0 * norm_w(rng, dim)).astype(np.float32)
    else:
        embd = (rng.standard_normal((n_vocab, dim)) * (logit_gain / math.sqrt(dim))).astype(np.float32)
        out_norm = norm_w(rng, dim)
    w.add_tensor("token_embd.weight", embd)
    w.add_tensor("output_norm.weight", out_norm)
    if not c["tied"]:
        w.add_tensor("output.weight", mat(rng, n_vocab, dim, logit_gain))

    for i in range(c["n_layer"]):
        p = f"blk.{i}."
        w.add_tensor(p + "attn_norm.weight", norm_w(rng, dim))
        w.add_tensor(p + "attn_q.weight", mat(rng, nh * hd, dim))
        w.add_tensor(p + "attn_k.weight", mat(rng, nkv * hd, dim))
        w.add_tensor(p + "attn_v.weight", mat(rng, nkv * hd, dim))
        if arch in ("qwen2", "gpt-oss", "qwen2moe"):
            w.add_tensor(p + "attn_q.bias", (0.2 * rng.standard_normal(nh * hd)).astype(np.float32))
            w.add_tensor(p + "attn_k.bias", (0.2 * rng.standard_normal(nkv * hd)).astype(np.float32))
            w.add_tensor(p + "attn_v.bias", (0.2 * rng.standard_normal(nkv * hd)).astype(np.float32))
        if arch in ("qwen3", "gemma3", "qwen3moe"):
            w.add_tensor(p + "attn_q_norm.weight", norm_w(rng, hd))
            w.add_tensor(p + "attn_k_norm.weight", norm_w(rng, hd))
        w.add_tensor(p + "attn_output.weight", mat(rng, dim, nh * hd, c["res_gain"]))
        if arch == "gpt-oss":
            w.add_tensor(p + "attn_output.bias", (0.2 * rng.standard_normal(dim)).astype(np.float32))
            w.add_tensor(p + "attn_sinks.weight", (1.0 + rng.standard_normal(nh)).astype(np.float32))
            w.add_tensor(p + "post_attention_norm.weight", norm_w(rng, dim))   # the FFN's input norm
            add_experts(w, rng, p, c, oss=True)
            continue
        if arch == "gemma3":
            w.add_tensor(p + "post_attention_norm.weight", norm_w(rng, dim))
        w.add_tensor(p + "ffn_norm.weight", norm_w(rng, dim))
        if arch in ("qwen3moe", "qwen2moe"):
            add_experts(w, rng, p, c)
            if arch == "qwen2moe":   # the shared expert and its gate (a [dim] vector: one logit)
                nsh = c["n_ff_shexp"]
                w.add_tensor(p + "ffn_gate_inp_shexp.weight", mat(rng, 1, dim, 2.0).reshape(dim))
                w.add_tensor(p + "ffn_gate_shexp.weight", mat(rng, nsh, dim))
                w.add_tensor(p + "ffn_up_shexp.weight", mat(rng, nsh, dim))
                w.add_tensor(p + "ffn_down_shexp.weight", mat(rng, dim, nsh, c["res_gain"]))
            continue
        w.add_tensor(p + "ffn_gate.weight", mat(rng, nff, dim))
        w.add_tensor(p + "ffn_up.weight", mat(rng, nff, dim))
        w.add_tensor(p + "ffn_down.weight", mat(rng, dim, nff, c["res_gain"]))
        if arch == "gemma3":
            w.add_tensor(p + "post_ffw_norm.weight", norm_w(rng, dim))

    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(REPO, "tests", "fixtures", "models")
    os.makedirs(out_dir, exist_ok=True)
    for name in MODELS:
        path = os.path.join(out_dir, f"{name}.gguf")
        build(name, path)
        size = os.path.getsize(path)
        if size > 1536 * 1024 or (name.startswith("rand-qwen35") and size > 1024 * 1024):
            raise SystemExit(f"make_gguf.py: {path} is {size} B, over the 1.5 MB budget")
        print(f"{path}: {size} B")


if __name__ == "__main__":
    main()
