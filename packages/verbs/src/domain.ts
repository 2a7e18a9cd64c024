/**
 * A protection domain (RFC 5040 §8.1.1) as the memory regions and queue pairs in it know it. mr.ts and
 * qp.ts name this interface rather than import pd.ts, which makes them; `ProtectionDomain` implements it.
 */
import type { StagTable } from '@rddp/ddp';

/** A protection domain as its regions and queue pairs know it: compared by identity, named by its id. */
export interface ProtectionDomainRef {
  readonly id: number;
  /** The device's STag table, where the domain's regions are registered (RFC 5041 §5.1.1). */
  readonly device: { readonly stags: StagTable };
}
