/* gguf_nan.c — for tests/resume_trust.test.sh: copies a GGUF with the f32 tensor NAME's values set to
 * NaN (the file otherwise byte-identical), so an arm running it returns non-finite logits:
 *   gguf_nan IN OUT NAME
 * Exit 0, or 1 with a message. Built by the test with cc (tests/gguf_edit.h, no strata code). */
#include "tests/gguf_edit.h"

int main(int argc, char **argv) {
    ge_src s;
    if (argc != 4 || ge_load(argv[1], &s)) { fprintf(stderr, "usage: gguf_nan IN OUT NAME (cannot read IN)\n"); return 1; }
    int t = ge_find_tensor(&s, argv[3]);
    if (t < 0) { fprintf(stderr, "gguf_nan: no tensor %s\n", argv[3]); return 1; }
    /* the tensor info: name, u32 n_dims, u64 dims[n_dims], u32 type, u64 offset */
    const uint8_t *p = s.p + s.t_info[t];
    p += 8 + ge_rd64(p);
    uint32_t nd = ge_rd32(p);
    uint64_t count = 1;
    for (uint32_t d = 0; d < nd; d++) count *= ge_rd64(p + 4 + 8 * d);
    uint32_t type = ge_rd32(p + 4 + 8 * nd);
    size_t at = s.data_off + (size_t)ge_tensor_offset(&s, t);
    if (type != 0 || at + count * 4 > s.n) { fprintf(stderr, "gguf_nan: %s is not an f32 tensor in the file\n", argv[3]); return 1; }
    const uint32_t nan = 0x7fc00000u;
    for (uint64_t i = 0; i < count; i++) memcpy(s.p + at + 4 * i, &nan, 4);
    FILE *f = fopen(argv[2], "wb");
    int bad = !f || fwrite(s.p, 1, s.n, f) != s.n;
    if (f && fclose(f)) bad = 1;
    ge_free_src(&s);
    if (bad) { fprintf(stderr, "gguf_nan: cannot write %s\n", argv[2]); return 1; }
    return 0;
}
