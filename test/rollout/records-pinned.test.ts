import test from 'ava';
import { goldenDigests } from './golden-cases.ts';

// The bytes of these records, as the engine wrote them before the engine-overhead work (issue 21):
// same seed, config and policy must give the same bytes, release after release, unless a record
// schema change says otherwise.
const pinned: { [key: string]: string } = {
  'calculator expert {}': 'ad6bd7316a59f2be4573fa4c3e1102a6229a03433edacd35b9620928c5414c37',
  'calculator random {}': '5b885f036831079998e5280058a2641cb6e17612d34fe719275a523754a677aa',
  'multihop-qa expert {}': '5d704402d91b0bc03cac2c221a4833bc5cda91507058599be1c3bbb48b38cc28',
  'multihop-qa naive-rag {}': '6c80fc83a35c2dc5e03f4bb88e3ceab7c844270f3117260e56dfa5a8884c225e',
  'multihop-qa noisy-expert {}': '48819e5b01efdd78b6478c4ce5d265310a2dfeec83308fdf77185cc9dc7c2650',
  'support-desk expert {}': '197d4ba02fcdcd8711b44df2f9c4f70dbea23eeb04c73b7b77b5e233d0b0b09e',
  'support-desk reckless {}': '3e6b265b0736dec7292159fca3a0128089dd96f08266bccf5f61003f3f0c6563',
  'gridworld expert {}': '2412b1906a623e612569c8ba18526694aef81013255d23660b6a1cdf28d266e7',
  'gridworld random {}': 'e94a3ca562b8cf73f892512f4c484fc1a9aebfa50d11aaa3a05f0d6cfe21ba5e',
  // files (issue 39): results of the real MCP filesystem server, pinned from its first version; the
  // scenario version names the server package's npm version since issue 56 (only it, the run id and
  // the checksum changed)
  'files expert {}': '3003e25aa7aa5f503c24a9ea5b22b3c8019e7535bf7b68cba9100d9ee8e51896',
  'files random {}': '6b51709b1305398c58c3e0ea894bdc386446fb3223399b34f61a2acf2bdde7c8',
  'calculator expert {"maxTurns":1}': '1fab79992020b2c9ed8b08af208ac14450da86c2b2cc717d4377505490ba90f5',
  'calculator random {"maxTurns":1}': '24bc9bbd7cbe947b0f60b8861d2ff36cd774ed7ed9f4dc105a2eda02e6f8c679',
  'multihop-qa expert {"maxTotalTokens":300}': '1ce216aca286ebf8919707385f9da2ff310231c652d4d497fb8d061a455a97f4',
  'multihop-qa naive-rag {"maxTotalTokens":300}': '2c21787391f48b1b94ad7522cfe73955679e24a2fc0b4d3581136f4fd2fbd3a1',
  'multihop-qa noisy-expert {"maxTotalTokens":300}': '3bd56a6d610bb94dc9b1f8714471eb78130d3566f8dda502530d71b82319ea59',
  'calculator expert {"maxTokensPerTurn":8}': 'b940471dd424c72caedea08818d8ec91702896f277b60e62974dabfd22a6cc16',
  'calculator random {"maxTokensPerTurn":8}': '793cd049ccedc99ac7153103d62fc8047256242eea80f7e3fa50178fe001d9f1',
};

test('records of every built-in scenario, policy and budget keep their bytes', async (t) => {
  t.deepEqual(await goldenDigests(), pinned);
});
