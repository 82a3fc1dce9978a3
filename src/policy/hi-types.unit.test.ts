import { beforeAll, describe, expect, it } from 'vitest';
import { loadFhirDefinitions } from '../core/fhir-definitions';
import { loadMappings } from '../mapping/index';
import { recordTypes } from '../mapping/record-types';
import { loadHiTypes } from './hi-types';

beforeAll(() => loadFhirDefinitions(), 120_000);

describe('the hi_types table (mappings/tables/hi-types.yaml)', () => {
  it('dates the care of every resource type a record type reads: under a consent’s date_range an undated one is never shown', () => {
    const { careDates } = loadHiTypes();
    const read = [...new Set([...recordTypes(loadMappings()).values()].flatMap((t) => t.sources.map((s) => s.resourceType)))];
    // Devices have no date of care of their own (a DeviceUseStatement dates their use); nor has a BodyStructure (the
    // condition, procedure or observation that refers to it dates the care).
    expect(read.filter((type) => !careDates[type] && type !== 'Device' && type !== 'BodyStructure').sort()).toEqual([]);
  });
});
