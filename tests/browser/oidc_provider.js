// A small OpenID Connect provider for the tests, on loopback: discovery, an
// authorization endpoint that signs "alice-oidc" in at once, a token endpoint
// that checks the PKCE verifier, the redirect URI and the client id, refresh
// tokens, and the JWKS relayd fetches. Tokens are ES256 JWTs of a key made at
// start, short-lived so that the app's refresh is exercised.
import { createServer } from 'node:http';
import crypto from 'node:crypto';

const b64url = (buf) => Buffer.from(buf).toString('base64url');

export class OidcProvider {
  constructor({ clientId, audience, lifetimeS = 65 }) {
    this.clientId = clientId;
    this.audience = audience;
    this.lifetimeS = lifetimeS;
    this.codes = new Map();
    this.refreshTokens = new Map();
    this.grants = [];
    this.errors = [];
    const { privateKey, publicKey } = crypto.generateKeyPairSync('ec', { namedCurve: 'P-256' });
    this.privateKey = privateKey;
    this.jwk = { ...publicKey.export({ format: 'jwk' }), kid: 'test-key', use: 'sig', alg: 'ES256' };
  }

  async start() {
    this.server = createServer((req, res) => this.handle(req, res));
    await new Promise((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    this.issuer = `http://127.0.0.1:${this.server.address().port}`;
    return this;
  }

  stop() {
    return new Promise((resolve) => this.server.close(resolve));
  }

  sign(claims) {
    const head = b64url(JSON.stringify({ alg: 'ES256', typ: 'JWT', kid: 'test-key' }));
    const body = b64url(JSON.stringify(claims));
    const sig = crypto.sign('sha256', Buffer.from(`${head}.${body}`), { key: this.privateKey, dsaEncoding: 'ieee-p1363' });
    return `${head}.${body}.${b64url(sig)}`;
  }

  tokens(sub) {
    const now = Math.floor(Date.now() / 1000);
    const claims = { iss: this.issuer, sub, iat: now, exp: now + this.lifetimeS };
    const refresh = crypto.randomBytes(16).toString('hex');
    this.refreshTokens.set(refresh, sub);
    return {
      token_type: 'Bearer',
      expires_in: this.lifetimeS,
      id_token: this.sign({ ...claims, aud: this.clientId }),
      access_token: this.sign({ ...claims, aud: this.audience }),
      refresh_token: refresh,
    };
  }

  send(res, status, body, origin) {
    const headers = { 'Content-Type': 'application/json', 'Cache-Control': 'no-store' };
    if (origin) headers['Access-Control-Allow-Origin'] = origin;
    res.writeHead(status, headers).end(JSON.stringify(body));
  }

  handle(req, res) {
    const url = new URL(req.url, this.issuer);
    const origin = req.headers.origin || null;
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      if (req.method === 'OPTIONS') {
        res.writeHead(204, { 'Access-Control-Allow-Origin': origin || '*', 'Access-Control-Allow-Headers': 'Content-Type',
          'Access-Control-Allow-Methods': 'GET, POST' }).end();
        return;
      }
      if (url.pathname === '/.well-known/openid-configuration') {
        this.send(res, 200, { issuer: this.issuer, authorization_endpoint: `${this.issuer}/authorize`,
          token_endpoint: `${this.issuer}/token`, jwks_uri: `${this.issuer}/jwks`, response_types_supported: ['code'],
          code_challenge_methods_supported: ['S256'] }, origin);
      } else if (url.pathname === '/jwks') {
        this.send(res, 200, { keys: [this.jwk] }, origin);
      } else if (url.pathname === '/authorize') {
        const p = url.searchParams;
        if (p.get('response_type') !== 'code' || p.get('client_id') !== this.clientId ||
            p.get('code_challenge_method') !== 'S256' || !p.get('code_challenge') || !p.get('state')) {
          this.errors.push(`bad authorization request: ${url.search}`);
          res.writeHead(400).end('bad request');
          return;
        }
        const code = crypto.randomBytes(16).toString('hex');
        this.codes.set(code, { challenge: p.get('code_challenge'), redirect: p.get('redirect_uri'), scope: p.get('scope') });
        const back = new URL(p.get('redirect_uri'));
        back.searchParams.set('code', code);
        back.searchParams.set('state', p.get('state'));
        res.writeHead(302, { Location: back.toString() }).end();
      } else if (url.pathname === '/token' && req.method === 'POST') {
        const p = new URLSearchParams(Buffer.concat(chunks).toString());
        this.grants.push(p.get('grant_type'));
        if (p.get('client_id') !== this.clientId) {
          this.send(res, 400, { error: 'invalid_client' }, origin);
        } else if (p.get('grant_type') === 'authorization_code') {
          const entry = this.codes.get(p.get('code'));
          this.codes.delete(p.get('code'));
          const verifier = p.get('code_verifier') || '';
          const challenge = b64url(crypto.createHash('sha256').update(verifier).digest());
          if (!entry || entry.challenge !== challenge || entry.redirect !== p.get('redirect_uri')) {
            this.errors.push('a code exchange without the right verifier or redirect');
            this.send(res, 400, { error: 'invalid_grant' }, origin);
          } else {
            this.send(res, 200, this.tokens('alice-oidc'), origin);
          }
        } else if (p.get('grant_type') === 'refresh_token' && this.refreshTokens.has(p.get('refresh_token'))) {
          const sub = this.refreshTokens.get(p.get('refresh_token'));
          this.refreshTokens.delete(p.get('refresh_token'));
          this.send(res, 200, this.tokens(sub), origin);
        } else {
          this.send(res, 400, { error: 'invalid_grant' }, origin);
        }
      } else {
        res.writeHead(404).end();
      }
    });
  }
}
