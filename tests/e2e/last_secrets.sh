# Runs after every other e2e test (tests/e2e/run.sh calls it last): no daemon log
# written by any e2e run contains a credential of the local cluster or a token
# minted for the tests, in whole or in recognisable part.
# shellcheck shell=bash
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

t_no_credential_in_any_daemon_log() {
	local n
	n=$(find "$E2E_LOGS" -maxdepth 1 -name '*.log' | wc -l)
	[ "$n" -ge 10 ] || fail "only $n daemon logs under $E2E_LOGS: the e2e runs did not leave their logs"
	# The credentials of the local cluster, and every token minted for the e2e tests.
	ADMIN_TOKEN=$(admin_token) LIMITED_TOKEN=$(sed -n 's/^LIMITED_TOKEN=//p' "$E2E_ROOT/.local/env") python3 - "$KUBECONFIG" "$E2E_LOGS" <<'PY' || fail "a credential leaked into a daemon log"
import base64, glob, os, re, sys
kubeconfig, logs = sys.argv[1], sys.argv[2]
secrets = []  # (what, string)
def opaque(what, tok):
    if tok:
        secrets.append((what, tok))
        if len(tok) >= 32:
            secrets.append((what + " (first 20 chars)", tok[:20]))
def jwt(what, tok):
    tok = tok.strip()
    if not tok:
        return
    secrets.append((what, tok))
    parts = tok.split(".")
    if len(parts) == 3:  # the header is the same for every token; the rest is not
        secrets.append((what + " (payload)", parts[1]))
        secrets.append((what + " (signature)", parts[2]))
        secrets.append((what + " (signature, first 24 chars)", parts[2][:24]))
opaque("admin bearer token", os.environ["ADMIN_TOKEN"])
opaque("limited token", os.environ.get("LIMITED_TOKEN", ""))
text = open(kubeconfig).read()
keys = re.findall(r"client-key-data:\s*(\S+)", text)
if not keys:
    print("    no client-key-data in the kubeconfig")
    sys.exit(1)
for k in keys:
    secrets.append(("client key data (base64)", k))
    secrets.append(("client key data (base64, 40 chars from offset 80)", k[80:120]))
    pem = base64.b64decode(k).decode()
    body = [l.strip() for l in pem.splitlines() if l.strip() and not l.startswith("-----")]
    for l in body:
        if len(l) >= 16:
            secrets.append(("client key PEM body line", l))
minted = glob.glob(os.path.join(logs, "minted-tokens", "*.token")) + glob.glob(os.path.join(logs, "*", "token"))
for p in minted:
    jwt("minted token " + os.path.relpath(p, logs), open(p).read())
# Subdirectories too: the logs of the controller pods on the real node.
files = sorted(glob.glob(os.path.join(logs, "**", "*.log"), recursive=True))
found = 0
for f in files:
    for i, line in enumerate(open(f, errors="replace"), 1):
        for what, s in secrets:
            if s in line:
                # Say where, never what.
                print("    %s found in %s:%d" % (what, f, i))
                found += 1
print("    scanned %d daemon logs for %d secret strings (%d minted tokens)" % (len(files), len(secrets), len(minted)))
sys.exit(1 if found else 0)
PY
}
