/** A run's wire evidence: the link's capture and its drops, decoded (./capture.ts) for the analysis. */
import { type CaptureInput, decodeCapture, type WireTrace } from './capture.js';

export type { WireTrace };

/** Decodes one run's captures; a capture that cannot be read yields no evidence and says why. */
export function decodeWire(input: CaptureInput): WireTrace {
  try {
    return decodeCapture(input);
  } catch (e) {
    return {
      packets: 0,
      dropped: 0,
      unmatchedDrops: 0,
      truncated: 0,
      fragments: 0,
      problems: [`the link capture could not be decoded: ${(e as Error).message}`],
      messages: [],
      losses: [],
    };
  }
}
