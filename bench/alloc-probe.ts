import { writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';

/**
 * Preloaded into a service a bench measures (`node --import ./bench/alloc-probe.ts`): the first
 * SIGUSR2 starts V8's sampling heap profiler, counting the objects garbage collection has already
 * taken too (so the profile's total is what was allocated, not what survived), or with
 * ALLOC_PROBE_MODE=cpu the CPU profiler; the next SIGUSR2 stops it and writes the profile to
 * ALLOC_PROBE_FILE, then renames it to ALLOC_PROBE_FILE.done when complete.
 */
const file = process.env.ALLOC_PROBE_FILE ?? `/tmp/alloc-probe-${process.pid}.json`;
const mode = process.env.ALLOC_PROBE_MODE === 'cpu' ? 'cpu' : 'heap';
let session: Session | undefined;

process.on('SIGUSR2', () => {
  void toggle().catch((error) => console.error('alloc-probe:', error));
});

async function toggle(): Promise<void> {
  if (!session) {
    session = new Session();
    session.connect();
    if (mode === 'cpu') {
      await session.post('Profiler.enable');
      await session.post('Profiler.setSamplingInterval', { interval: 200 });
      await session.post('Profiler.start');
    } else {
      await session.post('HeapProfiler.enable');
      await session.post('HeapProfiler.startSampling', {
        samplingInterval: 256,
        includeObjectsCollectedByMajorGC: true,
        // ALLOC_PROBE_MODE=promoted: what the young generation's collections did not take (promoted or still alive).
        includeObjectsCollectedByMinorGC: process.env.ALLOC_PROBE_MODE !== 'promoted',
      });
    }
    writeFileSync(`${file}.started`, '');
    return;
  }
  const result = mode === 'cpu' ? (await session.post('Profiler.stop')).profile : (await session.post('HeapProfiler.stopSampling')).profile;
  session.disconnect();
  session = undefined;
  writeFileSync(file, JSON.stringify(result));
  writeFileSync(`${file}.done`, '');
}
