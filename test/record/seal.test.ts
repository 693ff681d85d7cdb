import test from 'ava';
import fc from 'fast-check';
import { canonicalJson, inCanonicalOrderCopy } from '../../src/core/canonical-json.ts';
import type { EpisodeRecord } from '../../src/core/types.ts';
import { recordChecksum, sealRecord, serializeRecord } from '../../src/record/record.ts';

// sealRecord cuts the line out of the serialized body and puts the checksum field in; whatever the
// fields (none, all sorting before or after "checksum", odd keys) and whether they were built in
// canonical order (written by JSON.stringify) or not, the line is the canonical JSON.
test('a sealed line is the canonical JSON of the record with its checksum, for any fields, in any order', (t) => {
  const keys = fc.oneof(fc.string(), fc.constantFrom('a', 'checksum', 'chd', 'checksun', 'z', '', '"', 'é', '7'));
  fc.assert(
    fc.property(fc.dictionary(keys, fc.jsonValue(), { maxKeys: 8 }), fc.boolean(), (fields, ordered) => {
      const record = (ordered ? inCanonicalOrderCopy(fields) : fields) as unknown as Omit<EpisodeRecord, 'checksum'>;
      const sealed = sealRecord(record);
      const checksum = recordChecksum(record);
      const { checksum: _dropped, ...rest } = record as EpisodeRecord;
      return sealed.checksum === checksum && serializeRecord(sealed) === canonicalJson({ ...rest, checksum });
    }),
    { numRuns: 4000 },
  );
  t.pass();
});

test('fields JSON leaves out are left out of the sealed line, wherever they sort', (t) => {
  const record = {
    a: { toJSON: () => undefined },
    b: undefined,
    c: () => 1,
    answer: 'x',
    z: { toJSON: () => undefined },
  } as unknown as Omit<EpisodeRecord, 'checksum'>;
  const sealed = sealRecord(record);
  t.is(serializeRecord(sealed), `{"answer":"x","checksum":"${sealed.checksum}"}`);
  t.is(sealed.checksum, recordChecksum(record));
});
