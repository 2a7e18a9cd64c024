/** Memory region access rights (ibv_access_flags): RFC 5040's four, and Remote Atomic for RFC 7306. */
import { Access as DdpAccess } from '@rddp/ddp';
import { ACCESS_REMOTE_ATOMIC } from '@rddp/rdmap';

export type { AccessFlags, DdpProfile } from '@rddp/ddp';

export const Access = {
  ...DdpAccess,
  /** The peer may run atomic operations on the region (RFC 7306; IBV_ACCESS_REMOTE_ATOMIC). */
  RemoteAtomic: ACCESS_REMOTE_ATOMIC,
} as const;
