// What a service instance runs with, as the store records it (docs/services.md, "Limits"): a changed
// name restarts the instance at the next deployment, and a restart after a crash reads back the sizing
// it ran with, so names written by earlier versions must still read.
import { describe, expect, it } from 'vitest';
import { parseSizing, sizingName, volumeGiB } from '../../src/domain/app-services.js';

describe('service sizing', () => {
  it('names memory alone, or memory and volume, and reads both back', () => {
    expect(sizingName({ memoryMiB: 256 })).toBe('256MiB');
    expect(sizingName({ memoryMiB: 128, volumeGiB: 1 })).toBe('128MiB+1Gi');
    for (const sizing of [{ memoryMiB: 256 }, { memoryMiB: 1024, volumeGiB: 20 }]) {
      expect(parseSizing(sizingName(sizing))).toEqual(sizing);
    }
  });

  it('reads the names of the version before volumes, and nothing it does not know', () => {
    expect(parseSizing('512MiB')).toEqual({ memoryMiB: 512 });
    expect(parseSizing('512MiB+20G')).toBeUndefined();
    expect(parseSizing('startup+512MiB')).toBeUndefined();
  });

  it('takes volume_size in Gi only', () => {
    expect(volumeGiB('20Gi')).toBe(20);
    expect(volumeGiB(null)).toBeUndefined();
    expect(volumeGiB('20G')).toBeUndefined();
  });
});
