"""The counter board in headless Chromium (Debian's), driven by Playwright, against a live
`orderflow serve` whose worker pushes to the local APNs stand-in. Run by BoardBrowserTests
(Tests/CLITests/Board/BoardBrowserTests.swift), which starts the server and the stand-in,
creates the orders and passes, in the environment:

  BOARD_ORIGIN      http://127.0.0.1:PORT
  BOARD_LINK        the one-time sign-in link `orderflow serve` printed
  ORDERFLOW_BIN     the orderflow binary, whose environment names the same database
  BOARD_ARTIFACTS   where the screenshots go
  BOARD_SERVE_PID   the server's process: the script stops it (SIGINT) to prove the page
                    reconnects by itself, and starts another on the same port, with
  BOARD_SERVE_ARGUMENTS  `orderflow serve`'s arguments (a JSON list) but for --port
  CHROMIUM          the browser (default /usr/bin/chromium)

Orders (BoardBrowserTests makes them): 1042, 1043, 1045, 1046 received, 1044 in progress;
1047 in progress, its device's token answered 500 by the APNs stand-in every time; 1048 ready,
of a workflow version whose out_for_delivery content goes stale 8 s after it is entered.

Prints one line per check and exits non-zero when any failed.
"""
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
from urllib.parse import urlsplit

from playwright.sync_api import expect, sync_playwright

ORIGIN = os.environ["BOARD_ORIGIN"]
LINK = os.environ["BOARD_LINK"]
ORDERFLOW = os.environ["ORDERFLOW_BIN"]
ARTIFACTS = os.environ["BOARD_ARTIFACTS"]
SERVE_PID = int(os.environ["BOARD_SERVE_PID"])
SERVE_ARGUMENTS = json.loads(os.environ["BOARD_SERVE_ARGUMENTS"])
PORT = urlsplit(ORIGIN).port
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


def port_open():
    try:
        with socket.create_connection(("127.0.0.1", PORT), timeout=0.5):
            return True
    except OSError:
        return False


def wait_for(condition, seconds, what):
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} within {seconds} s")
        time.sleep(0.1)


def shot(page, name):
    os.makedirs(ARTIFACTS, exist_ok=True)
    # From the top: the sticky preview would otherwise sit where the last scroll left it.
    page.evaluate("window.scrollTo(0, 0)")
    page.screenshot(path=os.path.join(ARTIFACTS, f"{name}.png"), full_page=True)


restarted = None  # the server this script starts, stopped at the end
restarted_log = tempfile.NamedTemporaryFile(prefix="board-serve-", suffix=".log", delete=False)

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
        # The link shows a button and uses nothing (a link previewer fetching it burns nothing);
        # the click posts it.
        page.goto(LINK)
        page.goto(LINK)
        shot(page, "sign-in")
        page.get_by_role("button", name="Open the board").click()
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

    def keyboard_advance():
        # From the top of the page, Tab alone reaches 1046's advance; Enter opens its form (the
        # focus moves into it) and Enter again submits it.
        page.locator("h1").click()
        target = "step:1046:received->in_progress"
        for presses in range(1, 120):
            page.keyboard.press("Tab")
            if page.evaluate("document.activeElement?.dataset?.focusKey") == target:
                break
        else:
            raise AssertionError("Tab never reached 1046's In progress button")
        outline = page.evaluate("getComputedStyle(document.activeElement).outlineStyle")
        assert outline != "none", "the focused button shows no focus ring"
        page.keyboard.press("Enter")
        field = card(page, "received", "1046").get_by_label("Eta (minutes from now), optional")
        expect(field).to_be_focused()
        page.keyboard.type("15")
        page.keyboard.press("Enter")
        expect(card(page, "in_progress", "1046")).to_be_visible(timeout=5_000)
        print(f"   {presses} Tab presses to reach it", flush=True)

    check("keyboard alone: Tab to an advance, Enter, type, Enter", keyboard_advance)

    def failing_device():
        # APNs answers 500 for 1047's live token every time: the card says so, with the answer.
        device = card(page, "in_progress", "1047").locator('.device[data-device="anna-iphone-1047"]')
        expect(device).to_contain_text("failing: 500 InternalServerError", timeout=15_000)
        expect(device).to_have_class("device failing")
        card(page, "in_progress", "1047").get_by_role("button", name="Preview").click()
        preview = page.locator("#preview")
        # Nothing reached the phone; the timeline has the refused attempts and their reason.
        expect(preview.locator(".lock-screen .nothing")).to_contain_text("APNs refused every attempt", timeout=10_000)
        attempt = preview.locator(".push.retry").first
        expect(attempt).to_contain_text("retrying 500 InternalServerError")
        expect(attempt).to_contain_text("anna-iphone-1047")
        shot(page, "board-failing-preview")
        preview.get_by_role("button", name="Close the preview of order 1047").click()

    check("a device whose pushes fail on a live token shows failing, the reason in the preview's timeline", failing_device)

    def stale_after_its_date():
        orderflow("advance", "1048", "dispatch", "--eta", "10m", "--driver", "Kim", "--input", "window=10m..25m")
        dispatched = time.monotonic()
        moved = card(page, "out_for_delivery", "1048")
        expect(moved).to_be_visible(timeout=2_000)
        moved.get_by_role("button", name="Preview").click()
        preview = page.locator("#preview")
        expect(preview.locator(".activity-headline")).to_have_text("Out for delivery", timeout=10_000)
        # The daterange shows as a time window, counted to its start, not as numbers or ISO text.
        expect(preview.locator(".activity-date", has_text="Delivery window")).to_contain_text(
            re.compile(r"Delivery window \d\d:\d\d(\s?[AP]M)?–\d\d:\d\d(\s?[AP]M)? \(in (9|10) min\)"))
        if time.monotonic() - dispatched < 6:  # the stale date (8 s after dispatch) is still ahead
            expect(preview.locator(".stale-badge")).to_have_count(0)
            expect(preview.locator(".activity.stale")).to_have_count(0)
        # It passes while the preview stays open: the Lock Screen turns stale by itself.
        expect(preview.locator(".stale-badge")).to_contain_text("may be out of date", timeout=15_000)
        expect(preview.locator(".activity")).to_have_class("activity stale")
        print(f"   stale {time.monotonic() - dispatched:.1f} s after the dispatch", flush=True)
        preview.screenshot(path=os.path.join(ARTIFACTS, "preview-stale.png"))
        preview.get_by_role("button", name="Close the preview of order 1048").click()

    check("the preview turns stale when the pushed stale date passes", stale_after_its_date)

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

    def reconnects_after_restart():
        global restarted
        page.evaluate("window.boardNotReloaded = true")
        expect(page.locator("#connection")).to_have_text("Live")
        os.kill(SERVE_PID, signal.SIGINT)
        wait_for(lambda: not port_open(), 30, "the server did not stop")
        expect(page.locator("#connection")).to_have_text("Reconnecting…", timeout=10_000)
        expect(page.locator("#offline")).to_be_visible()
        shot(page, "board-reconnecting")
        time.sleep(3)  # away for a while: the browser's retries fail meanwhile
        restarted = subprocess.Popen([ORDERFLOW, "serve", "--port", str(PORT), *SERVE_ARGUMENTS],
                                     stdin=subprocess.DEVNULL, stdout=restarted_log, stderr=restarted_log)
        back = time.monotonic()
        expect(page.locator("#connection")).to_have_text("Live", timeout=20_000)
        expect(page.locator("#offline")).to_be_hidden()
        print(f"   live again {time.monotonic() - back:.1f} s after the server was started again", flush=True)
        orderflow("advance", "1043", "ready")
        expect(card(page, "ready", "1043")).to_be_visible(timeout=2_000)
        assert page.evaluate("window.boardNotReloaded === true"), "the page was reloaded"

    check("after a server restart the page reconnects by itself and follows advances, without a reload", reconnects_after_restart)

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

    def android_card():
        # An Android phone follows the order too: the server's history then renders each
        # transition's Android data message (`android`; an order only iPhones follow has none).
        # The merchant has no Firebase project here, so the push it gets is made up: the history
        # as the worker records it once FCM accepted one (`platform: "android"`) of the same
        # transition, served in place of the real one while the preview is opened again.
        orderflow("token", "register", "--device", "anna-pixel", "--fcm", "fTqa1:APA91b" + "Xy_9-" * 30)
        orderflow("follow", "1044", "anna-pixel")
        real = page.request.get(f"{ORIGIN}/v1/orders/1044/history")
        assert real.ok, f"GET the history of 1044: {real.status}"
        history = real.json()
        # The worker's own attempts for the phone (it follows now, and the merchant has no Firebase
        # project) are left out: the card is drawn from the push made up below, alone.
        history["deliveries"] = [d for d in history["deliveries"] if d["device"] != "anna-pixel"]
        sent = sorted((d for d in history["deliveries"] if d["outcome"] == "sent"), key=lambda d: (d["seq"], d["id"]))
        assert sent, "order 1044 has no push APNs accepted, to copy for Android"
        android = dict(sent[-1], id=max(d["id"] for d in history["deliveries"]) + 1, device="anna-pixel",
                       platform="android", token_kind="fcm")
        history["deliveries"].append(android)
        message = next(t for t in history["transitions"] if t["seq"] == android["seq"]).get("android")
        assert message, "the history's transition carries no Android message"
        # The server puts the message each Android delivery sent on it (`android`); the card
        # draws from that.
        android["android"] = message
        # food-order's `android:` sections: grey by default, ready green with the chip "Ready",
        # out for delivery blue; the point at ready, the third of four segments.
        assert message["segments"] == "100:#9E9E9E,100:#9E9E9E,100:#4CAF50,100:#2196F3", message["segments"]
        assert message["progress"] == "200" and message["chip"] == "Ready" and message["title"] == "Order 1044 is ready", message
        preview = page.locator("#preview")
        page.route("**/v1/orders/1044/history", lambda route: route.fulfill(json=history))
        try:
            preview.get_by_role("button", name="Close the preview of order 1044").click()
            card(page, "ready", "1044").get_by_role("button", name="Preview").click()
            shade = preview.locator(".android-screen")
            expect(shade.locator(".live-update-title")).to_have_text("Order 1044 is ready", timeout=10_000)
            expect(shade.locator(".live-update-text")).to_have_text("Your order is ready.")
            expect(shade.locator(".chip-text")).to_have_text("Ready")
            expect(shade.locator(".segments")).to_have_attribute("aria-label", "at 200 of 400, 4 segments")
            colors = shade.locator(".segment").evaluate_all("(spans) => spans.map((s) => getComputedStyle(s).backgroundColor)")
            assert colors == ["rgb(158, 158, 158)", "rgb(158, 158, 158)", "rgb(76, 175, 80)", "rgb(33, 150, 243)"], colors
            expect(shade.locator(".segment.done")).to_have_count(2)
            tracker = shade.locator(".tracker")
            expect(tracker).to_have_attribute("data-icon", "ic_food_bag")
            assert tracker.evaluate("(point) => point.style.left") == "50%", "the point is at ready, half way"
            expect(shade.locator(".live-update-kind")).to_have_text("· Live Update")
            expect(shade.locator(".caption")).to_have_text(re.compile(r"^As sent to Android at .* \(update, transition \d+\)$"))
            # The Lock Screen card is still drawn from the iPhone's pushes, beside it.
            expect(preview.locator(".activity-headline")).to_have_text("Ready")
            expect(preview.locator(".push-device", has_text="Android · anna-pixel")).to_have_count(1)
            preview.screenshot(path=os.path.join(ARTIFACTS, "preview-android.png"))
        finally:
            page.unroute("**/v1/orders/1044/history")
        # Without a push to an Android phone there is no Android card.
        preview.get_by_role("button", name="Close the preview of order 1044").click()
        card(page, "ready", "1044").get_by_role("button", name="Preview").click()
        expect(preview.locator(".activity-headline")).to_have_text("Ready", timeout=10_000)
        expect(preview.locator(".android-screen")).to_have_count(0)

    check("an order pushed to an Android phone shows its Live Update beside the Lock Screen", android_card)

    def sign_out():
        old = [cookie for cookie in context.cookies() if cookie["name"] == "orderflow_board"][0]
        page.get_by_role("button", name="Sign out").click()
        expect(page).to_have_url(f"{ORIGIN}/board?signed-out", timeout=5_000)
        expect(page.locator(".notice")).to_contain_text("You signed out")
        expect(page.locator("main")).to_contain_text("orderflow board-link --merchant ID")
        assert not [c for c in context.cookies() if c["name"] == "orderflow_board"], f"cookie kept: {context.cookies()}"
        shot(page, "signed-out")
        # The old cookie, kept by someone, opens nothing: the session ended on the server.
        thief = browser.new_context()
        try:
            thief.add_cookies([{"name": old["name"], "value": old["value"], "url": ORIGIN}])
            api = thief.request.get(f"{ORIGIN}/v1/orders")
            assert api.status == 401, f"/v1/orders with the old cookie: {api.status}"
            again = thief.new_page()
            response = again.goto(f"{ORIGIN}/board")
            assert response.status == 401, f"/board with the old cookie: {response.status}"
            expect(again.locator("main")).to_contain_text("orderflow board-link --merchant ID")
        finally:
            thief.close()

    check("signing out ends the session: the page says how to get a link, the old cookie opens nothing", sign_out)

    def no_script_errors():
        assert not console_errors, console_errors

    check("no script error on the page", no_script_errors)
    browser.close()

if restarted is not None:
    restarted.send_signal(signal.SIGINT)
    try:
        status = restarted.wait(timeout=30)
    except subprocess.TimeoutExpired:
        restarted.kill()
        status = "none (killed after 30 s)"
    if status != 0:
        failures.append("the restarted server stops cleanly")
        restarted_log.flush()
        with open(restarted_log.name, encoding="utf-8", errors="replace") as log:
            print(f"FAIL - the restarted server exited {status}:\n{log.read()[-3000:]}", flush=True)
os.unlink(restarted_log.name)

print(f"board: {checks - len(failures)} passed, {len(failures)} failed", flush=True)
sys.exit(1 if failures else 0)
