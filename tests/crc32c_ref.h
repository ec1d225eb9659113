/* crc32c_ref.h — CRC32C (Castagnoli: reflected, polynomial 0x82F63B78, init and final xor
 * 0xFFFFFFFF) one bit at a time, straight from the definition. It is the reference
 * tests/test_journal.c checks driver/journal.c's table-driven crc32c against, and the CRC of
 * tests/jtool.c, which stays free of strata code (the journal's own reader is what it tests).
 * Header-only, nothing allocated, no dependency but the C library. */
#ifndef STRATA_CRC32C_REF_H
#define STRATA_CRC32C_REF_H

#include <stddef.h>
#include <stdint.h>

/* The CRC32C of p[n], from scratch. */
static inline uint32_t crc32c_ref(const unsigned char *p, size_t n) {
    uint32_t c = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++) c = (c >> 1) ^ (c & 1 ? 0x82F63B78u : 0);
    }
    return ~c;
}

#endif
