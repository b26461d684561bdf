/**
 * The verdict of a figure measured in turns (bench/api.ts, bench/send.ts): on a VM whose speed
 * drifts, one run of a pair can land in different weather from the other, so a figure is taken
 * several times and judged by its median.
 */
export function medianOf(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] as number;
}
