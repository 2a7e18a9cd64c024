/** CRC32c of `bytes[start, end)` continuing from `crc` (a finished CRC32c of the preceding octets, or 0). */
export declare function calculate(bytes: Uint8Array, start: number, end: number, crc: number): number;
