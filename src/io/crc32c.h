/*
 * crc32c.h - CRC-32C (Castagnoli), the checksum of every .musa section.
 * SSE4.2's crc32 instruction where the CPU has it, else a
 * table (the same values).
 *
 *     uint32_t c = musa_crc32c(0, buf, n);          // whole buffer
 *     c = musa_crc32c(musa_crc32c(0, a, na), b, nb); // == crc of a then b
 */
#ifndef MUSA_IO_CRC32C_H
#define MUSA_IO_CRC32C_H

#include "../base/base.h"

/* CRC-32C of data[0..n), continuing from crc (0 to start). */
uint32_t musa_crc32c(uint32_t crc, const void *data, size_t n);

#endif
