// Loopback stand-ins for Sigstore: OIDC issuer (oauth2-mock-server), Fulcio, Rekor v1/v2, TSA
// (@sigstore/mock's CA / CT log / tlog / TSA objects behind plain node:http servers), for
// jaxcache's tests (tests/support/sigstore_stack.py starts it on free ports, stops it by PID).
// Usage: node server.mjs STATE_DIR   -> writes STATE_DIR/services.json (URLs + public key material)
// LOG_SKEW_S=N: Rekor's and the TSA's clocks run N seconds ahead (a log time after the signing
// certificate expired: the verifier must refuse it). Why it wraps the mock: the README of
// jaxcache's spike 46, summarised in tests/support/sigstore_stack.py.
import http from 'node:http';
import fs from 'node:fs';
import crypto from 'node:crypto';
import { createRequire } from 'node:module';
import { OAuth2Issuer, OAuth2Service } from 'oauth2-mock-server';
const require = createRequire(import.meta.url);
const mock = require('@sigstore/mock');
const jose = require('jose');
const pkijs = require('pkijs');
const x509 = require('@peculiar/x509');

const STATE = process.argv[2];
if (!STATE) { console.error('usage: node server.mjs STATE_DIR'); process.exit(2); }
const SKEW_MS = 1000 * +(process.env.LOG_SKEW_S || 0);
const HOST = '127.0.0.1';
const GH = 'https://token.actions.githubusercontent.com', GL = 'https://gitlab.com';
const t0 = Date.now();
const spki = (k) => k.publicKey.export({ format: 'der', type: 'spki' });
const key = () => crypto.generateKeyPairSync('ec', { namedCurve: 'prime256v1' });
const readBody = (req) => new Promise((ok) => { const c = []; req.on('data', (d) => c.push(d)); req.on('end', () => ok(Buffer.concat(c))); });
const listen = (fn) => new Promise((ok) => { const s = http.createServer(fn); s.listen(0, HOST, () => ok(`http://${HOST}:${s.address().port}`)); });
const send = (res, code, body, type = 'application/json') => { res.writeHead(code, { 'Content-Type': type }); res.end(body); };
const pem = (der) => `-----BEGIN CERTIFICATE-----\n${Buffer.from(der).toString('base64')}\n-----END CERTIFICATE-----\n`;

// ---- OIDC issuer: oauth2-mock-server + /mint (any profile) + /gha (GitHub ACTIONS_ID_TOKEN_REQUEST_URL emulation)
const issuer = new OAuth2Issuer();
await issuer.keys.generate('RS256');
const svc = new OAuth2Service(issuer);
function claims(profile, q, oidcUrl) {
  const sha = q.sha || 'a'.repeat(40), ref = q.ref || 'refs/heads/main';
  if (profile === 'gitlab') {
    const p = q.project_path || 'org/repo', branch = ref.replace(/^refs\/(heads|tags)\//, '');
    return { iss: GL, sub: `project_path:${p}:ref_type:branch:ref:${branch}`, project_path: p, project_id: '42',
      namespace_path: p.split('/')[0], namespace_id: '7', ref: branch, ref_type: ref.startsWith('refs/tags/') ? 'tag' : 'branch',
      ref_protected: 'true', sha, pipeline_source: 'push', pipeline_id: '1001', job_id: '2002', user_login: 'dev',
      ci_config_ref_uri: `gitlab.com/${p}//.gitlab-ci.yml@${ref}`, ci_config_sha: sha, project_visibility: 'private',
      runner_environment: 'gitlab-hosted', runner_id: '1' };
  }
  if (profile === 'local') return { iss: oidcUrl, sub: q.sub || 'dev@example.com', email: q.sub || 'dev@example.com' };
  const repo = q.repository || 'org/repo', wf = q.workflow_path || '.github/workflows/jax-cache.yml';
  const ev = q.event_name || (ref.startsWith('refs/pull/') ? 'pull_request' : 'push');
  return { iss: GH, sub: ev === 'pull_request' ? `repo:${repo}:pull_request` : `repo:${repo}:ref:${ref}`,
    repository: repo, repository_owner: repo.split('/')[0], repository_id: '123', repository_owner_id: '456',
    repository_visibility: 'private', ref, ref_type: 'branch', sha, event_name: ev, workflow: 'jax-cache',
    workflow_ref: `${repo}/${wf}@${ref}`, workflow_sha: sha, job_workflow_ref: `${repo}/${wf}@${ref}`, job_workflow_sha: sha,
    run_id: '9000', run_number: '1', run_attempt: '1', actor: 'dev', runner_environment: 'github-hosted' };
}
async function mint(q, oidcUrl) {
  const c = { ...claims(q.profile || 'github', q, oidcUrl), aud: q.aud ?? q.audience ?? 'sigstore' };
  for (const [k, v] of Object.entries(q)) if (!['profile', 'aud', 'audience', 'exp'].includes(k)) c[k] = v; // overrides
  return issuer.buildToken({ expiresIn: +(q.exp || 600), scopesOrTransform: (_h, p) => Object.assign(p, c) });
}
const oidcUrl = await listen(async (req, res) => {
  const u = new URL(req.url, 'http://x'), q = Object.fromEntries(u.searchParams);
  if (u.pathname === '/mint') return send(res, 200, await mint(q, issuer.url), 'text/plain');
  if (u.pathname === '/gha') { // what GitHub's ACTIONS_ID_TOKEN_REQUEST_URL returns
    if (!/^bearer .+/i.test(req.headers.authorization || '')) return send(res, 401, '{"message":"no request token"}');
    return send(res, 200, JSON.stringify({ value: await mint(q, issuer.url) }));
  }
  return svc.requestHandler(req, res); // /.well-known/openid-configuration, /jwks, /token, ...
});
issuer.url = oidcUrl;
const JWKS = jose.createLocalJWKSet({ keys: issuer.keys.toJSON() });
const ALLOWED_ISS = new Set([oidcUrl, GH, GL, ...(process.env.EXTRA_ISSUERS || '').split(',').filter(Boolean)]);

// ---- Fulcio: verify the token (signature vs local JWKS, aud=sigstore, iss allow-list), verify CSR, map claims
const ctKey = key(), caKey = key();
const ctlog = await mock.initializeCTLog(ctKey);
const ca = await mock.initializeCA(caKey, ctlog);
function fulcioIdentity(c) { // same mapping as real Fulcio's github-workflow / gitlab-pipeline principals
  const e = [{ oid: '1.3.6.1.4.1.57264.1.1', value: c.iss, legacy: true }, { oid: '1.3.6.1.4.1.57264.1.8', value: c.iss }];
  const add = (n, v, legacy) => v !== undefined && e.push({ oid: `1.3.6.1.4.1.57264.1.${n}`, value: String(v), legacy: !!legacy }); // mock checks legacy === true
  if (c.job_workflow_ref) {
    const g = 'https://github.com';
    add(2, c.event_name, 1); add(3, c.sha, 1); add(4, c.workflow, 1); add(5, c.repository, 1); add(6, c.ref, 1);
    add(9, `${g}/${c.job_workflow_ref}`); add(10, c.job_workflow_sha); add(11, c.runner_environment);
    add(12, `${g}/${c.repository}`); add(13, c.sha); add(14, c.ref); add(15, c.repository_id);
    add(16, `${g}/${c.repository_owner}`); add(17, c.repository_owner_id); add(18, `${g}/${c.workflow_ref}`);
    add(19, c.workflow_sha); add(20, c.event_name);
    add(21, `${g}/${c.repository}/actions/runs/${c.run_id}/attempts/${c.run_attempt}`); add(22, c.repository_visibility);
    return { san: `${g}/${c.job_workflow_ref}`, ext: e };
  }
  if (c.project_path) {
    const g = 'https://gitlab.com', ref = `refs/${c.ref_type === 'tag' ? 'tags' : 'heads'}/${c.ref}`;
    add(9, `https://${c.ci_config_ref_uri}`); add(10, c.ci_config_sha); add(11, c.runner_environment);
    add(12, `${g}/${c.project_path}`); add(13, c.sha); add(14, ref); add(15, c.project_id);
    add(16, `${g}/${c.namespace_path}`); add(17, c.namespace_id); add(18, `https://${c.ci_config_ref_uri}`);
    add(19, c.ci_config_sha); add(20, c.pipeline_source); add(21, `${g}/${c.project_path}/-/jobs/${c.job_id}`);
    add(22, c.project_visibility);
    return { san: `https://${c.ci_config_ref_uri}`, ext: e };
  }
  return { san: c.email || c.sub, ext: e };
}
async function fulcio(body, headers) {
  const j = JSON.parse(body);
  const tok = (headers.authorization || '').replace(/^bearer\s+/i, '') || j.credentials?.oidcIdentityToken;
  const { payload: c } = await jose.jwtVerify(tok, JWKS, { audience: 'sigstore' });
  if (!ALLOWED_ISS.has(c.iss)) throw new Error(`untrusted issuer ${c.iss}`);
  let pub = j.publicKeyRequest?.publicKey?.content;
  if (!pub) { // sigstore-python sends base64(PEM CSR); the CSR signature is the proof of possession
    let csrText = j.certificateSigningRequest;
    if (!csrText.includes('BEGIN')) csrText = Buffer.from(csrText, 'base64').toString();
    const csr = new x509.Pkcs10CertificateRequest(csrText);
    if (!(await csr.verify())) throw new Error('CSR signature invalid');
    pub = csr.publicKey.toString('pem');
  }
  const { san, ext } = fulcioIdentity(c);
  const der = await ca.issueCertificate({ publicKey: Buffer.from(pub.replace(/-----[^-]+-----|\s/g, ''), 'base64'), subjectAltName: san, extensions: ext });
  return JSON.stringify({ signedCertificateEmbeddedSct: { chain: { certificates: [pem(der), pem(ca.rootCertificate)] } } });
}
const fulcioUrl = await listen(async (req, res) => {
  const body = await readBody(req);
  if (req.method !== 'POST' || !req.url.startsWith('/api/v2/signingCert')) return send(res, 404, '{"message":"not found"}');
  try { send(res, 201, await fulcio(body.toString(), req.headers)); }
  catch (e) { send(res, e.code?.startsWith?.('ERR_J') ? 401 : 400, JSON.stringify({ code: 400, message: String(e.message) })); }
});

// ---- Rekor (v1 POST /api/v1/log/entries and v2 POST /api/v2/log/entries), the mock's single-leaf "log"
const rekorKey = key();
let rekorUrl = await listen(async (req, res) => {
  const body = (await readBody(req)).toString();
  const h = req.url.startsWith('/api/v2/log/entries') ? rekorV2 : req.url.startsWith('/api/v1/log/entries') ? rekorV1 : null;
  if (req.method !== 'POST' || !h) return send(res, 404, '{"message":"not found"}');
  const r = await h.fn(body);
  send(res, r.statusCode, r.response, r.contentType || 'text/plain');
});
const tlog = await mock.initializeTLog(rekorUrl, rekorKey);
tlog.getCurrentTime = () => Date.now() + SKEW_MS;
const rekorV1 = mock.rekorHandler(tlog);
// @sigstore/mock 0.12.1's rekorV2Handler is unusable with sigstore-python (empty `hashes` dropped by toJSON,
// proof logIndex = random index with treeSize 1, rootHash hex decoded as base64, body = the request instead of
// the log Entry), so v2 is done here: a one-leaf log whose checkpoint is signed by the same Rekor key.
const rekorV2 = { fn: async (body) => {
  const q = JSON.parse(body).hashedRekordRequestV002;
  if (!q) return { statusCode: 400, response: 'only hashedRekordRequestV002 supported' };
  const entry = { apiVersion: '0.0.2', kind: 'hashedrekord',
    spec: { hashedRekordV002: { data: { algorithm: 'SHA2_256', digest: q.digest }, signature: q.signature } } };
  const bodyBuf = Buffer.from(JSON.stringify(entry));
  const logID = crypto.createHash('sha256').update(spki(rekorKey)).digest();
  const root = crypto.createHash('sha256').update(Buffer.from([0])).update(bodyBuf).digest();
  const host = new URL(rekorUrl).host;
  const note = `${host}\n1\n${root.toString('base64')}\n`;
  const sig = Buffer.concat([logID.subarray(0, 4), crypto.sign('sha256', Buffer.from(note), rekorKey.privateKey)]);
  const tle = { logIndex: '0', logId: { keyId: logID.toString('base64') }, kindVersion: { kind: 'hashedrekord', version: '0.0.2' },
    canonicalizedBody: bodyBuf.toString('base64'),
    inclusionProof: { logIndex: '0', rootHash: root.toString('base64'), treeSize: '1', hashes: [],
      checkpoint: { envelope: `${note}\n\u2014 ${host} ${sig.toString('base64')}\n` } } };
  return { statusCode: 201, response: JSON.stringify(tle), contentType: 'application/json' };
} };

// ---- TSA: RFC 3161 DER TimeStampReq in (what sigstore-python sends), DER TimeStampResp out
const tsa = await mock.initializeTSA(key());
tsa.getCurrentTime = () => new Date(Date.now() + SKEW_MS);
const origTstInfo = tsa.tstInfo.bind(tsa);
tsa.tstInfo = (r) => { const t = origTstInfo({ ...r, nonce: 1 }); if (r.nonceAsn1) t.nonce = r.nonceAsn1; else delete t.nonce; return t; };
const tsaUrl = await listen(async (req, res) => {
  const body = await readBody(req);
  if (req.method !== 'POST' || !req.url.startsWith('/api/v1/timestamp')) return send(res, 404, 'not found', 'text/plain');
  try {
    const q = pkijs.TimeStampReq.fromBER(body);
    const resp = await tsa.timestamp({ artifactHash: Buffer.from(q.messageImprint.hashedMessage.valueBlock.valueHexView),
      hashAlgorithmOID: q.messageImprint.hashAlgorithm.algorithmId, nonceAsn1: q.nonce,
      policyOID: q.reqPolicy || '1.3.6.1.4.1.57264.2', certReq: !!q.certReq });
    send(res, 201, resp, 'application/timestamp-reply');
  } catch (e) { send(res, 400, String(e.message), 'text/plain'); }
});

const b64 = (b) => Buffer.from(b).toString('base64');
const services = { started_at: new Date(t0).toISOString(), startup_ms: Date.now() - t0,
  oidc: oidcUrl, fulcio: fulcioUrl, rekor: rekorUrl, tsa: `${tsaUrl}/api/v1/timestamp`,
  fulcio_root_der: b64(ca.rootCertificate), ctlog_pubkey_der: b64(ctlog.publicKey), ctlog_id: b64(ctlog.logID),
  rekor_pubkey_der: b64(spki(rekorKey)), tsa_chain_der: [b64(tsa.intCertificate), b64(tsa.rootCertificate)] };
fs.mkdirSync(STATE, { recursive: true });
fs.writeFileSync(`${STATE}/services.json.tmp`, JSON.stringify(services, null, 1));
fs.renameSync(`${STATE}/services.json.tmp`, `${STATE}/services.json`);
console.log(JSON.stringify({ ready: true, ...services, fulcio_root_der: undefined, tsa_chain_der: undefined }));
