"""The counter board in headless Chromium (Debian's), driven by Playwright, against a live
`orderflow serve` whose worker pushes to the local APNs stand-in. Run by BoardBrowserTests
(Tests/CLITests/BoardBrowserTests.swift), which starts the server and the stand-in, creates the
orders and passes, in the environment:

  BOARD_ORIGIN      http://127.0.0.1:PORT
  BOARD_LINK        the one-time sign-in link `orderflow serve` printed
  ORDERFLOW_BIN     the orderflow binary, whose environment names the same database
  BOARD_ARTIFACTS   where the screenshots go
  CHROMIUM          the browser (default /usr/bin/chromium)

Prints one line per check and exits non-zero when any failed.
"""
import os
import subprocess
import sys
import time

from playwright.sync_api import expect, sync_playwright

ORIGIN = os.environ["BOARD_ORIGIN"]
LINK = os.environ["BOARD_LINK"]
ORDERFLOW = os.environ["ORDERFLOW_BIN"]
ARTIFACTS = os.environ["BOARD_ARTIFACTS"]
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
TABLET = {"width": 1024, "height": 900}
PHONE = {"width": 390, "height": 844}

failures = []
checks = 0


def check(name, step):
    global checks
    checks += 1
    started = time.monotonic()
    try:
        step()
        print(f"ok - {name} ({time.monotonic() - started:.2f} s)", flush=True)
    except Exception as error:  # noqa: BLE001 - every failure is reported, then the next check runs
        failures.append(name)
        print(f"FAIL - {name}: {error}", flush=True)


def orderflow(*arguments):
    result = subprocess.run([ORDERFLOW, *arguments], capture_output=True, text=True, timeout=30)
    if result.returncode != 0:
        raise AssertionError(f"orderflow {' '.join(arguments)} exited {result.returncode}: {result.stderr.strip()}")
    return result.stdout


def column(page, state):
    return page.locator(f'.column[data-state="{state}"]')


def card(page, state, order):
    return column(page, state).locator(f'[data-order="{order}"]')


def shot(page, name):
    os.makedirs(ARTIFACTS, exist_ok=True)
    page.screenshot(path=os.path.join(ARTIFACTS, f"{name}.png"), full_page=True)


with sync_playwright() as playwright:
    # --no-sandbox: CI runs as root, where Chromium's sandbox cannot start.
    browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
    context = browser.new_context(viewport=TABLET)
    page = context.new_page()
    console_errors = []
    page.on("pageerror", lambda error: console_errors.append(str(error)))

    def signed_out_page_says_how():
        response = page.goto(f"{ORIGIN}/board")
        assert response.status == 401, f"status {response.status}"
        expect(page.locator("main")).to_contain_text("orderflow board-link --merchant ID")

    check("without a session the page says how to get a link", signed_out_page_says_how)

    def board_loads():
        page.goto(LINK)
        expect(page.locator("#connection")).to_have_text("Live", timeout=10_000)
        assert page.url == f"{ORIGIN}/board", f"the token stays in the address bar: {page.url}"
        expect(card(page, "received", "1042")).to_be_visible()
        expect(card(page, "in_progress", "1044")).to_be_visible()
        cookies = context.cookies()
        session = [cookie for cookie in cookies if cookie["name"] == "orderflow_board"]
        assert session and session[0]["httpOnly"] and session[0]["sameSite"] == "Strict", f"cookie: {cookies}"

    check("the sign-in link opens the board, with the orders in their columns", board_loads)

    def link_works_once():
        other = browser.new_context(viewport=TABLET)
        try:
            again = other.new_page()
            response = again.goto(LINK)
            assert response.status == 401, f"status {response.status}"
            expect(again.locator(".notice")).to_contain_text("used already")
        finally:
            other.close()

    check("the sign-in link cannot be used twice", link_works_once)

    def cli_advance_moves_card():
        orderflow("advance", "1043", "accept")
        said = time.monotonic()
        expect(card(page, "in_progress", "1043")).to_be_visible(timeout=1_000)
        print(f"   moved {time.monotonic() - said:.2f} s after the CLI returned", flush=True)

    check("an order advanced from the CLI moves within a second, without a reload", cli_advance_moves_card)

    def tap_advances():
        card(page, "in_progress", "1044").get_by_role("button", name="Ready").click()
        expect(card(page, "ready", "1044")).to_be_visible(timeout=5_000)

    check("tapping an advance moves the card", tap_advances)

    def form_for_input():
        received = card(page, "received", "1042")
        received.get_by_role("button", name="In progress").click()
        field = received.get_by_label("Eta (minutes from now), optional")
        expect(field).to_be_focused()
        field.fill("20")
        field.press("Enter")  # the keyboard submits the form
        expect(card(page, "in_progress", "1042")).to_be_visible(timeout=5_000)

    check("a transition with input opens a form, submitted from the keyboard", form_for_input)

    def cancel_confirms():
        target = card(page, "received", "1046")
        target.get_by_role("button", name="Cancel order #1046").click()
        expect(target.locator(".confirm")).to_contain_text("Cancel order #1046?")
        target.get_by_role("button", name="Keep the order").click()
        expect(card(page, "received", "1046")).to_be_visible()

    check("cancel asks for confirmation first", cancel_confirms)

    def preview_shows_pushed_content():
        card(page, "ready", "1044").get_by_role("button", name="Preview").click()
        preview = page.locator("#preview")
        expect(preview).to_be_visible()
        # The worker pushes the update; the push event redraws the preview from the history.
        expect(preview.locator(".activity-headline")).to_have_text("Ready", timeout=10_000)
        expect(preview.locator(".activity-message")).to_have_text("Your order is ready.")
        expect(preview.locator(".alert-title")).to_have_text("Order 1044 is ready")
        expect(preview.locator(".push.sent").first).to_contain_text("update")
        expect(preview.locator(".push.sent").first).to_contain_text("priority 10")
        shot(page, "board-tablet-preview")

    check("the preview shows the content and alert actually pushed, and the pushes", preview_shows_pushed_content)

    def stale_shown():
        card(page, "in_progress", "1042").get_by_role("button", name="Preview").click()
        preview = page.locator("#preview")
        expect(preview.locator(".activity-headline")).to_have_text("Preparing", timeout=10_000)
        # in_progress has no stale-after: the badge shows only once a pushed stale date passed.
        expect(preview.locator(".stale-badge")).to_have_count(0)

    check("a preview without a passed stale date shows no stale badge", stale_shown)

    def conflict_shows_message():
        # A second board whose live feed is cut: it still shows 1045 as received.
        lagging = browser.new_context(viewport=TABLET, storage_state=context.storage_state())
        try:
            lagging.route("**/v1/events*", lambda route: route.abort())
            other = lagging.new_page()
            other.goto(f"{ORIGIN}/board")
            stale_card = card(other, "received", "1045")
            expect(stale_card).to_be_visible(timeout=10_000)
            orderflow("advance", "1045", "accept")  # someone else was faster
            stale_card.get_by_role("button", name="In progress").click()
            stale_card.get_by_role("button", name="Move to In progress").click()
            moved = card(other, "in_progress", "1045")
            # The engine's own sentence (409: the order is no longer in the expected state).
            expect(moved.locator(".message")).to_contain_text("in_progress", timeout=5_000)
            expect(moved.locator(".message")).not_to_contain_text("content type")
            print(f"   the board said: {moved.locator('.message').inner_text()}", flush=True)
        finally:
            lagging.close()

    check("a conflicting advance shows the engine's sentence and the card as it is now", conflict_shows_message)

    def screenshots():
        page.locator("#preview").get_by_role("button", name="Close the preview of order 1042").click()
        shot(page, "board-tablet")
        page.set_viewport_size(PHONE)
        shot(page, "board-phone")
        card(page, "ready", "1044").get_by_role("button", name="Preview").click()
        expect(page.locator("#preview .activity-headline")).to_have_text("Ready", timeout=10_000)
        page.locator("#preview").screenshot(path=os.path.join(ARTIFACTS, "preview-phone.png"))
        page.set_viewport_size(TABLET)

    check("screenshots at phone and tablet widths", screenshots)

    def no_script_errors():
        assert not console_errors, console_errors

    check("no script error on the page", no_script_errors)
    browser.close()

print(f"board: {checks - len(failures)} passed, {len(failures)} failed", flush=True)
sys.exit(1 if failures else 0)
