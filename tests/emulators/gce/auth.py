"""auth.py - the OAuth 2 token endpoint (POST /token) and bearer checks.

Grants, as oauth2.googleapis.com answers them:
  - urn:ietf:params:oauth:grant-type:jwt-bearer: a service account's
    assertion, RS256-signed; the signature is verified with the public key
    of the registered account (iss), `aud` must be Google's token URL or
    this endpoint's, exp - iat <= 3600 s and now within [iat - 300, exp],
    and `scope` must be present;
  - refresh_token: client_id, client_secret and refresh_token of a
    registered authorized_user.
Tokens live --token-lifetime seconds; compute calls need one with the
compute or cloud-platform scope.  `cryptography` (scripts/test-requirements.txt)
is imported only to verify a JWT.
"""

import base64
import json
import secrets
import threading
import time
import urllib.parse

from errors import OAuthError, insufficient_scopes, invalid_credentials, login_required

JWT_GRANT = "urn:ietf:params:oauth:grant-type:jwt-bearer"
GOOGLE_TOKEN_URI = "https://oauth2.googleapis.com/token"
COMPUTE_SCOPES = ("https://www.googleapis.com/auth/compute",
                  "https://www.googleapis.com/auth/cloud-platform")


def _b64url(s):
    return base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))


class Auth:
    def __init__(self, lifetime, token_url):
        self.lifetime = lifetime
        self.token_url = token_url          # http://127.0.0.1:PORT/token
        self.lock = threading.Lock()
        self.tokens = {}                    # token -> (expiry, scopes, principal)
        self.accounts = {}                  # client_email -> public key (cryptography object)
        self.users = {}                     # client_id -> (client_secret, refresh_token)
        self.grants = 0

    # ------------------------------------------------------------ registry

    def add_service_account_file(self, path):
        """Registers the account of a service-account key file (its public key only)."""
        with open(path) as f:
            info = json.load(f)
        from cryptography.hazmat.primitives import serialization
        key = serialization.load_pem_private_key(info["private_key"].encode(), password=None)
        self.add_service_account(info["client_email"], key.public_key())

    def add_service_account(self, email, public_key):
        with self.lock:
            self.accounts[email] = public_key

    def add_service_account_pem(self, email, pem):
        from cryptography.hazmat.primitives import serialization
        self.add_service_account(email, serialization.load_pem_public_key(pem.encode()))

    def add_authorized_user_file(self, path):
        with open(path) as f:
            info = json.load(f)
        self.add_authorized_user(info["client_id"], info["client_secret"], info["refresh_token"])

    def add_authorized_user(self, client_id, client_secret, refresh_token):
        with self.lock:
            self.users[client_id] = (client_secret, refresh_token)

    def mint(self, scopes=COMPUTE_SCOPES, lifetime=None, principal="emulator"):
        """A fresh bearer token (also what /_emulator/token hands out)."""
        token = "ya29.emu-" + secrets.token_urlsafe(24)
        life = self.lifetime if lifetime is None else lifetime
        with self.lock:
            self.tokens[token] = (time.time() + life, tuple(scopes), principal)
        return token, life

    # ---------------------------------------------------------- /token

    def token(self, content_type, body):
        """The JSON reply to POST /token, or raises OAuthError."""
        if not content_type.startswith("application/x-www-form-urlencoded"):
            raise OAuthError(400, "invalid_request", "Content-Type must be application/x-www-form-urlencoded")
        form = dict(urllib.parse.parse_qsl(body.decode("utf-8", "replace"), keep_blank_values=True))
        grant = form.get("grant_type")
        if grant == JWT_GRANT:
            scopes, principal = self._jwt(form.get("assertion", ""))
        elif grant == "refresh_token":
            scopes, principal = self._refresh(form)
        elif not grant:
            raise OAuthError(400, "unsupported_grant_type", "Invalid grant_type: ")
        else:
            raise OAuthError(400, "unsupported_grant_type", "Invalid grant_type: " + grant)
        token, life = self.mint(scopes, principal=principal)
        with self.lock:
            self.grants += 1
        reply = {"access_token": token, "expires_in": max(int(life) - 1, 0), "token_type": "Bearer"}
        if grant == "refresh_token":
            reply["scope"] = " ".join(scopes)
        return reply

    def _jwt(self, assertion):
        parts = assertion.split(".")
        if len(parts) != 3:
            raise OAuthError(400, "invalid_grant", "Invalid JWT: malformed assertion")
        try:
            header = json.loads(_b64url(parts[0]))
            claims = json.loads(_b64url(parts[1]))
            sig = _b64url(parts[2])
        except (ValueError, UnicodeDecodeError):
            raise OAuthError(400, "invalid_grant", "Invalid JWT: malformed assertion")
        if not isinstance(header, dict) or header.get("alg") != "RS256":
            raise OAuthError(400, "invalid_grant", "Invalid JWT: alg must be RS256")
        if not isinstance(claims, dict):
            raise OAuthError(400, "invalid_grant", "Invalid JWT: malformed assertion")
        with self.lock:
            key = self.accounts.get(claims.get("iss"))
        if key is None:
            raise OAuthError(400, "invalid_grant", "Invalid grant: account not found")
        from cryptography.exceptions import InvalidSignature
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.asymmetric import padding
        try:
            key.verify(sig, (parts[0] + "." + parts[1]).encode(), padding.PKCS1v15(), hashes.SHA256())
        except InvalidSignature:
            raise OAuthError(400, "invalid_grant", "Invalid JWT Signature.")
        if claims.get("aud") not in (GOOGLE_TOKEN_URI, self.token_url):
            raise OAuthError(400, "invalid_grant",
                             "Invalid JWT: Failed audience check. The right audience is " + GOOGLE_TOKEN_URI)
        iat, exp, now = claims.get("iat"), claims.get("exp"), time.time()
        if (not isinstance(iat, (int, float)) or not isinstance(exp, (int, float)) or exp - iat > 3600
                or exp <= iat or now < iat - 300 or now > exp):
            raise OAuthError(400, "invalid_grant",
                             "Invalid JWT: Token must be a short-lived token (60 minutes) and in a "
                             "reasonable timeframe. Check your iat and exp values in the JWT claim.")
        scope = claims.get("scope")
        if not isinstance(scope, str) or not scope.strip():
            raise OAuthError(400, "invalid_scope", "Invalid OAuth scope or ID token audience provided.")
        return scope.split(), claims["iss"]

    def _refresh(self, form):
        cid = form.get("client_id", "")
        with self.lock:
            user = self.users.get(cid)
        if user is None:
            raise OAuthError(401, "invalid_client", "The OAuth client was not found.")
        if form.get("client_secret") != user[0]:
            raise OAuthError(401, "invalid_client", "Unauthorized")
        if form.get("refresh_token") != user[1]:
            raise OAuthError(400, "invalid_grant", "Bad Request")
        scope = form.get("scope") or "https://www.googleapis.com/auth/cloud-platform"
        return scope.split(), "user:" + cid

    # ------------------------------------------------------- bearer check

    def check(self, authorization, scopes=COMPUTE_SCOPES):
        """The principal behind an Authorization header whose token has one
        of `scopes` (compute's by default), or raises ApiError 401/403."""
        if not authorization:
            raise login_required()
        kind, _, token = authorization.partition(" ")
        if kind.lower() != "bearer" or not token.strip():
            raise invalid_credentials()
        with self.lock:
            entry = self.tokens.get(token.strip())
        if entry is None or entry[0] <= time.time():
            raise invalid_credentials()
        if not any(s in scopes for s in entry[1]):
            raise insufficient_scopes()
        return entry[2]
