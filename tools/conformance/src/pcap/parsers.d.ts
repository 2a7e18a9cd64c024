/** Types of the two capture-file parsers (neither ships its own). */
declare module 'pcap-parser' {
  import type { EventEmitter } from 'node:events';
  import type { Readable } from 'node:stream';
  export interface PcapGlobalHeader {
    magicNumber: number;
    majorVersion: number;
    minorVersion: number;
    gmtOffset: number;
    timestampAccuracy: number;
    snapshotLength: number;
    linkLayerType: number;
  }
  export interface PcapPacket {
    header: { timestampSeconds: number; timestampMicroseconds: number; capturedLength: number; originalLength: number };
    data: Buffer;
  }
  export interface PcapParser extends EventEmitter {
    on(event: 'globalHeader', cb: (h: PcapGlobalHeader) => void): this;
    on(event: 'packet', cb: (p: PcapPacket) => void): this;
    on(event: 'error', cb: (e: Error) => void): this;
    on(event: 'end', cb: () => void): this;
  }
  export function parse(input: string | Readable): PcapParser;
}

declare module 'pcap-ng-parser' {
  import { Transform } from 'node:stream';
  export interface PcapNgInterface {
    linkType: number;
    snapLen: number;
    name?: string;
    /** Options other than if_name, as `code_<n>`: their octets as a UTF-8 string. */
    [option: `code_${number}`]: string | undefined;
  }
  export interface PcapNgPacket {
    interfaceId: number;
    timestampHigh: number;
    timestampLow: number;
    data: Buffer;
  }
  export default class PCAPNGParser extends Transform {
    interfaces: PcapNgInterface[];
  }
}
