/* UTF-8 as Python's strict decoder, protobuf's `string` and msgspec take it: no overlong
 * forms, no surrogates, nothing beyond U+10FFFF. Shared by the lanes' C reads
 * (_tencent_lane.c, and through _json.h _debezium_lane.c and _dataworks_lane.c). */
#ifndef RECON_UTF8_H
#define RECON_UTF8_H
#include <stdint.h>

/* One sequence at p (its first byte >= 0x80, before e): its length, or 0 when not valid. */
static inline int utf8_seq(const uint8_t *p, const uint8_t *e) {
    uint8_t c = *p;
    int n;
    uint32_t cp;
    if (c >= 0xC2 && c <= 0xDF) {
        n = 1;
        cp = c & 0x1F;
    } else if (c >= 0xE0 && c <= 0xEF) {
        n = 2;
        cp = c & 0x0F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        n = 3;
        cp = c & 0x07;
    } else {
        return 0;
    }
    if (e - p <= n) return 0;
    for (int i = 1; i <= n; i++) {
        if ((p[i] & 0xC0) != 0x80) return 0;
        cp = (cp << 6) | (p[i] & 0x3F);
    }
    if ((n == 2 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) ||
        (n == 3 && (cp < 0x10000 || cp > 0x10FFFF)))
        return 0;
    return n + 1;
}

/* Whether [p, e) is all valid UTF-8. */
static inline int utf8_valid(const uint8_t *p, const uint8_t *e) {
    while (p < e) {
        if (*p < 0x80) {
            p++;
            continue;
        }
        int n = utf8_seq(p, e);
        if (!n) return 0;
        p += n;
    }
    return 1;
}
#endif
