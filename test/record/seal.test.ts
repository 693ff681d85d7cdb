import test from 'ava';
import fc from 'fast-check';
import { canonicalJson } from '../../src/core/canonical-json.ts';
import type { EpisodeRecord } from '../../src/core/types.ts';
import { recordChecksum, sealRecord, serializeRecord } from '../../src/record/record.ts';

// sealRecord cuts the line out of the serialized body and puts the checksum field in; whatever the
// fields (none, all sorting before or after "checksum", odd keys), the line is the canonical JSON.
test('a sealed line is the canonical JSON of the record with its checksum, for any fields', (t) => {
  const keys = fc.oneof(fc.string(), fc.constantFrom('a', 'checksum', 'chd', 'checksun', 'z', '', '"', 'é'));
  fc.assert(
    fc.property(fc.dictionary(keys, fc.jsonValue(), { maxKeys: 8 }), (fields) => {
      const record = fields as unknown as Omit<EpisodeRecord, 'checksum'>;
      const sealed = sealRecord(record);
      const checksum = recordChecksum(record);
      const { checksum: _dropped, ...rest } = record as EpisodeRecord;
      return sealed.checksum === checksum && serializeRecord(sealed) === canonicalJson({ ...rest, checksum });
    }),
    { numRuns: 2000 },
  );
  t.pass();
});
