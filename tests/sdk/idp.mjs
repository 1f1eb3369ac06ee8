// A real OAuth 2.1 authorization server for state-http's tests: oidc-provider (a certified
// OpenID Provider) on 127.0.0.1, issuing RFC 9068 JWT access tokens for one resource and
// opaque ones for another, with dynamic client registration, PKCE, introspection and
// revocation. Sign-in and consent are granted at once, as user `alice`, so a client's whole
// authorization-code flow runs without a person.
//
//   node idp.mjs RESOURCE OPAQUE_RESOURCE DIR
//
// Writes DIR/key.pem (the issuer's signing key, so a test can mint what an attacker would),
// DIR/second.pem (a key it publishes only after POST /test/rotate) and each one's public half
// (DIR/key.pub.pem, DIR/second.pub.pem), then prints one line
// of JSON: {"issuer": ...}. Tokens carry `groups: ["team-a"]`. GET /test/jwks-fetches counts
// key-set fetches.
import http from 'node:http';
import fs from 'node:fs';
import path from 'node:path';
import { generateKeyPairSync } from 'node:crypto';
import Provider, { errors } from 'oidc-provider';

const [resource, opaqueResource, dir] = process.argv.slice(2);
if (!resource || !opaqueResource || !dir) {
  console.error('usage: node idp.mjs RESOURCE OPAQUE_RESOURCE DIR');
  process.exit(2);
}

function signingKey(kid, file) {
  const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  fs.writeFileSync(path.join(dir, file), privateKey.export({ type: 'pkcs8', format: 'pem' }));
  fs.writeFileSync(path.join(dir, file.replace('.pem', '.pub.pem')), publicKey.export({ type: 'spki', format: 'pem' }));
  return { ...privateKey.export({ format: 'jwk' }), kid, alg: 'RS256', use: 'sig' };
}
const first = signingKey('key-1', 'key.pem');
const second = signingKey('key-2', 'second.pem');
const publicPart = ({ d, p, q, dp, dq, qi, ...rest }) => rest;

const server = http.createServer();
await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
const issuer = `http://127.0.0.1:${server.address().port}`;

const provider = new Provider(issuer, {
  jwks: { keys: [first] },
  clients: [
    // The resource server's own client, for introspection.
    { client_id: 'state-http', client_secret: 'state-http-introspection-secret', grant_types: [], response_types: [], redirect_uris: [] },
    // A machine client, for tokens without a browser.
    {
      client_id: 'robot',
      client_secret: 'robot-secret-robot-secret',
      grant_types: ['client_credentials'],
      response_types: [],
      redirect_uris: [],
      scope: 'state:read state:write',
    },
  ],
  scopes: ['openid', 'offline_access', 'state:read', 'state:write'],
  features: {
    devInteractions: { enabled: false },
    registration: { enabled: true },
    clientCredentials: { enabled: true },
    introspection: { enabled: true },
    revocation: { enabled: true },
    resourceIndicators: {
      enabled: true,
      defaultResource: () => resource,
      useGrantedResource: () => true,
      getResourceServerInfo(ctx, indicator) {
        if (indicator !== resource && indicator !== opaqueResource) throw new errors.InvalidTarget();
        return {
          scope: 'state:read state:write',
          audience: indicator,
          accessTokenTTL: 600,
          accessTokenFormat: indicator === resource ? 'jwt' : 'opaque',
          jwt: { sign: { alg: 'RS256' } },
        };
      },
    },
  },
  extraTokenClaims: () => ({ groups: ['team-a'] }),
  findAccount: (ctx, sub) => ({ accountId: sub, claims: () => ({ sub }) }),
  interactions: { url: (ctx, interaction) => `/interaction/${interaction.uid}` },
  pkce: { required: () => true },
});
provider.on('server_error', (ctx, error) => console.error('idp: server error', error));

// Signs `alice` in and grants what the client asked for, with no page in between.
async function interact(req, res) {
  const details = await provider.interactionDetails(req, res);
  const { prompt, params, session } = details;
  let result;
  if (prompt.name === 'login') {
    result = { login: { accountId: 'alice' } };
  } else {
    const grant = details.grantId
      ? await provider.Grant.find(details.grantId)
      : new provider.Grant({ accountId: session.accountId, clientId: params.client_id });
    if (prompt.details.missingOIDCScope) grant.addOIDCScope(prompt.details.missingOIDCScope.join(' '));
    if (prompt.details.missingOIDCClaims) grant.addOIDCClaims(prompt.details.missingOIDCClaims);
    for (const [indicator, scopes] of Object.entries(prompt.details.missingResourceScopes || {})) {
      grant.addResourceScope(indicator, scopes.join(' '));
    }
    result = { consent: { grantId: await grant.save() } };
  }
  await provider.interactionFinished(req, res, result, { mergeWithLastSubmission: true });
}

let rotated = false;
let jwksFetches = 0;
const callback = provider.callback();
server.on('request', (req, res) => {
  const url = new URL(req.url, issuer);
  if (url.pathname.startsWith('/interaction/')) {
    interact(req, res).catch((error) => {
      console.error('idp: interaction failed', error);
      res.statusCode = 500;
      res.end(String(error));
    });
    return;
  }
  if (url.pathname === '/jwks') jwksFetches += 1;
  if (url.pathname === '/jwks' && rotated) {
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify({ keys: [publicPart(first), publicPart(second)] }));
    return;
  }
  if (url.pathname === '/test/rotate' && req.method === 'POST') {
    rotated = true;
    res.end('rotated');
    return;
  }
  if (url.pathname === '/test/jwks-fetches') {
    res.end(String(jwksFetches));
    return;
  }
  callback(req, res);
});

process.on('SIGTERM', () => process.exit(0));
console.log(JSON.stringify({ issuer }));
