"""rmq-dashboard --login-required over a broker with aclEnable, in headless Chromium: no page without a
login, a wrong secret refused with the broker's remark, a read-only account's write refused by the
broker (NO_PERMISSION on the page), an admin's write done, and a POST without a login refused."""

from __future__ import annotations

import dataclasses
import re
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator

import pytest
from playwright.sync_api import Page, expect

from rmq.perf.procs import Processes
from tests.helpers.acl import start_acl_cluster
from tests.helpers.dashboard import start_dashboard
from tests.helpers.processes import Cluster

ADMIN = ("admin-key", "admin-secret")
READER = ("reader-key", "reader-secret")
RULES = f"""\
accounts:
  - accessKey: {ADMIN[0]}
    secretKey: {ADMIN[1]}
    admin: true
  - accessKey: {READER[0]}
    secretKey: {READER[1]}
    defaultTopicPerm: SUB
    defaultGroupPerm: SUB
"""


@dataclasses.dataclass
class Site:
    url: str
    cluster: Cluster


@pytest.fixture(scope="module")
def site(module_processes: Processes, tmp_path_factory) -> Iterator[Site]:
    cluster = start_acl_cluster(module_processes.spawn, tmp_path_factory.mktemp("dashboard-acl"), RULES, ADMIN)
    try:
        cluster.create_topic("Guarded", queues=2)
        _, url = start_dashboard(module_processes.spawn, cluster.namesrv_addr, "--login-required")
        yield Site(url, cluster)
    finally:
        cluster.close()


def log_in(page: Page, account: tuple[str, str]) -> None:
    page.get_by_label("Access key").fill(account[0])
    page.get_by_label("Secret key").fill(account[1])
    page.get_by_role("button", name="Log in").click()


def test_a_page_asks_for_a_login_first_and_shows_itself_after_it(page: Page, site: Site):
    page.goto("/topics")
    expect(page).to_have_url(f"{site.url}/login?next=/topics")
    log_in(page, ADMIN)
    expect(page).to_have_url(f"{site.url}/topics")
    expect(page.locator("#topics")).to_contain_text("Guarded")
    expect(page.locator("header")).to_contain_text(ADMIN[0])


def test_a_wrong_secret_is_refused_with_the_brokers_remark(page: Page):
    page.goto("/")
    log_in(page, (ADMIN[0], "guessed"))
    expect(page.locator("#error")).to_contain_text("login refused")
    expect(page.locator("#error")).to_contain_text(f"Check signature failed for accessKey={ADMIN[0]}")
    page.goto("/consumers")
    expect(page).to_have_url(re.compile(r"/login\?next="))


def test_a_read_only_account_reads_and_sees_the_brokers_refusal_of_a_write(page: Page, site: Site):
    page.goto("/topics")
    log_in(page, READER)
    expect(page.locator("#topics")).to_contain_text("Guarded")
    form = page.locator("#create-topic")
    form.get_by_label("Topic").fill("ByReader")
    form.get_by_label("Queues").fill("1")
    with page.expect_response(lambda r: r.request.method == "POST") as posted:
        form.get_by_role("button").click()
    assert posted.value.status == 403
    expect(page.locator("#error")).to_contain_text("NO_PERMISSION")
    expect(page.locator("#error")).to_contain_text(
        f"Need admin permission for request code=17, but accessKey={READER[0]}"
    )
    assert not site.cluster.max_offsets("ByReader"), "the topic was not made"


def test_an_admin_account_writes_and_logging_out_ends_the_session(page: Page, site: Site):
    page.goto("/topics")
    log_in(page, ADMIN)
    form = page.locator("#create-topic")
    form.get_by_label("Topic").fill("ByAdmin")
    form.get_by_label("Queues").fill("3")
    form.get_by_role("button").click()
    expect(page.locator("#topic-name")).to_have_text("ByAdmin")
    assert len(site.cluster.max_offsets("ByAdmin")) == 3
    page.get_by_role("button", name="Log out").click()
    expect(page).to_have_url(re.compile(r"/login$"))
    page.goto("/topics/ByAdmin")
    expect(page).to_have_url(re.compile(r"/login\?next="))


def test_a_post_without_a_login_is_refused(site: Site):
    request = urllib.request.Request(f"{site.url}/topics", data=b"topic=Anonymous&queues=1&perm=RW", method="POST")
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=10)
    assert refused.value.code == 403 and b"log in first" in refused.value.read()
    assert not site.cluster.max_offsets("Anonymous")


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


@pytest.mark.parametrize("target", ["//evil.example/x", "/\\evil.example/x", "https://evil.example/x"])
def test_a_login_never_sends_the_browser_off_the_site(site: Site, target: str):
    form = urllib.parse.urlencode({"access_key": ADMIN[0], "secret_key": ADMIN[1], "next": target}).encode()
    opener = urllib.request.build_opener(_NoRedirect)
    with pytest.raises(urllib.error.HTTPError) as answered:
        opener.open(urllib.request.Request(f"{site.url}/login", data=form, method="POST"), timeout=10)
    assert answered.value.code == 302
    assert answered.value.headers["Location"] == "/", answered.value.headers["Location"]
