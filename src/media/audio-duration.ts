import { type FileHandle, open } from 'node:fs/promises';

/**
 * Playing time in seconds, when the headers tell it cheaply: WAV from its `fmt ` and `data`
 * chunks, MP3 from the first frame (a Xing/Info/VBRI frame count when present, else the first
 * frame's bitrate over the whole stream, exact for constant-bitrate files). Other formats, and
 * headers that do not add up, give null: the duration is a hint for checks, not a promise.
 */
export async function audioDurationSeconds(path: string, ext: string): Promise<number | null> {
  if (ext !== 'wav' && ext !== 'mp3') return null;
  const file = await open(path, 'r');
  try {
    const size = (await file.stat()).size;
    const seconds = ext === 'wav' ? await wavDuration(file, size) : await mp3Duration(file, size);
    return seconds !== null && Number.isFinite(seconds) && seconds > 0 ? Math.round(seconds * 1000) / 1000 : null;
  } finally {
    await file.close();
  }
}

async function read(file: FileHandle, position: number, length: number): Promise<Buffer> {
  const buffer = Buffer.alloc(length);
  const { bytesRead } = await file.read(buffer, 0, length, position);
  return buffer.subarray(0, bytesRead);
}

async function wavDuration(file: FileHandle, size: number): Promise<number | null> {
  let byteRate = 0;
  // Chunks follow the 12-byte RIFF header; a `LIST` or `fact` chunk may come before `data`.
  for (let offset = 12, chunks = 0; offset + 8 <= size && chunks < 64; chunks++) {
    // Chunk id and length, then for `fmt `: format, channels, sample rate, byte rate.
    const header = await read(file, offset, 20);
    if (header.length < 8) return null;
    const id = header.toString('latin1', 0, 4);
    const length = header.readUInt32LE(4);
    if (id === 'fmt ' && header.length >= 20) byteRate = header.readUInt32LE(16);
    if (id === 'data') {
      // Streamed recorders leave the length at 0 or 0xFFFFFFFF: then the data runs to the end.
      const dataBytes = length === 0 || offset + 8 + length > size ? size - offset - 8 : length;
      return byteRate > 0 ? dataBytes / byteRate : null;
    }
    offset += 8 + length + (length % 2);
  }
  return null;
}

const MPEG1_BITRATES = [0, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320];
const MPEG2_BITRATES = [0, 8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160];
const SAMPLE_RATES: Record<number, number[]> = { 3: [44100, 48000, 32000], 2: [22050, 24000, 16000], 0: [11025, 12000, 8000] };
const SCAN_BYTES = 64 * 1024;

async function mp3Duration(file: FileHandle, size: number): Promise<number | null> {
  let start = 0;
  const id3 = await read(file, 0, 10);
  if (id3.length === 10 && id3.toString('latin1', 0, 3) === 'ID3') {
    // ID3v2 size is "synchsafe": four 7-bit bytes; a footer adds another 10 bytes.
    const tagSize = ((id3[6]! & 0x7f) << 21) | ((id3[7]! & 0x7f) << 14) | ((id3[8]! & 0x7f) << 7) | (id3[9]! & 0x7f);
    start = 10 + tagSize + (id3[5]! & 0x10 ? 10 : 0);
  }
  const window = await read(file, start, SCAN_BYTES);
  for (let i = 0; i + 4 <= window.length; i++) {
    const frame = parseFrameHeader(window.readUInt32BE(i));
    if (!frame) continue;
    // A real frame is followed by another one; a stray 0xFFE bit pattern is not.
    const next = i + frame.length;
    if (next + 4 <= window.length && !parseFrameHeader(window.readUInt32BE(next))) continue;
    const framesFromHeader = vbrFrameCount(window, i, frame);
    if (framesFromHeader) return (framesFromHeader * frame.samplesPerFrame) / frame.sampleRate;
    return ((size - start - i) * 8) / (frame.bitrateKbps * 1000);
  }
  return null;
}

interface FrameHeader {
  mpeg1: boolean;
  mono: boolean;
  bitrateKbps: number;
  sampleRate: number;
  samplesPerFrame: number;
  length: number;
}

/** An MPEG audio Layer III frame header, or undefined when the 32 bits are not one. */
function parseFrameHeader(bits: number): FrameHeader | undefined {
  if (bits >>> 21 !== 0x7ff) return undefined;
  const version = (bits >>> 19) & 0b11; // 3: MPEG-1, 2: MPEG-2, 0: MPEG-2.5
  const layer = (bits >>> 17) & 0b11; // 1: Layer III
  const bitrateIndex = (bits >>> 12) & 0b1111;
  const rateIndex = (bits >>> 10) & 0b11;
  if (version === 1 || layer !== 1 || bitrateIndex === 0 || bitrateIndex === 15 || rateIndex === 3) return undefined;
  const mpeg1 = version === 3;
  const bitrateKbps = (mpeg1 ? MPEG1_BITRATES : MPEG2_BITRATES)[bitrateIndex]!;
  const sampleRate = SAMPLE_RATES[version]![rateIndex]!;
  const padding = (bits >>> 9) & 1;
  const samplesPerFrame = mpeg1 ? 1152 : 576;
  const length = Math.floor(((samplesPerFrame / 8) * bitrateKbps * 1000) / sampleRate) + padding;
  return { mpeg1, mono: ((bits >>> 6) & 0b11) === 3, bitrateKbps, sampleRate, samplesPerFrame, length };
}

/** The frame count a variable-bitrate encoder wrote into the first frame (Xing/Info or VBRI). */
function vbrFrameCount(window: Buffer, at: number, frame: FrameHeader): number | undefined {
  const sideInfo = frame.mpeg1 ? (frame.mono ? 17 : 32) : frame.mono ? 9 : 17;
  const xing = at + 4 + sideInfo;
  const tag = window.toString('latin1', xing, xing + 4);
  if ((tag === 'Xing' || tag === 'Info') && xing + 12 <= window.length && window.readUInt32BE(xing + 4) & 1) {
    return window.readUInt32BE(xing + 8) || undefined;
  }
  const vbri = at + 4 + 32;
  if (window.toString('latin1', vbri, vbri + 4) === 'VBRI' && vbri + 18 <= window.length) {
    return window.readUInt32BE(vbri + 14) || undefined;
  }
  return undefined;
}
