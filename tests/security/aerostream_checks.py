"""Checks of our own for schemathesis, loaded by scripts/ci/45-security.sh
(SCHEMATHESIS_HOOKS=aerostream_checks): what an agent with security on
answers a request without a valid login."""
import schemathesis


# A write whose body is not JSON, or that comes from another site's page,
# is refused (415, 403) before the login is looked at: that refusal reveals
# nothing and changes nothing, so it counts as refused too.
BEFORE_LOGIN = (403, 415)


def _refused(response, allowed):
    if response.status_code in BEFORE_LOGIN and response.request.method not in ("GET", "HEAD", "OPTIONS"):
        return
    if response.status_code not in allowed:
        raise AssertionError(
            f"answered {response.status_code} to a request without a valid login "
            f"(expected {' or '.join(map(str, allowed))})")
    if response.status_code == 401 and "basic" not in " ".join(response.headers.get("www-authenticate", [])).lower():
        raise AssertionError("a 401 without `WWW-Authenticate: Basic`: a browser would not ask for a login")


@schemathesis.check
def refused_without_login(ctx, response, case):
    """No Authorization header at all: 401, whatever the request."""
    _refused(response, (401,))


@schemathesis.check
def refused_with_a_wrong_login(ctx, response, case):
    """A wrong password: 401, or 429 from an agent that limits failed logins."""
    _refused(response, (401, 429))
