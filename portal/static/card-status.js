// Live status of the connector cards (OpenLineage page, Integrations page).
//
// A card rendered while an export is queued or running has data-polling="true": it asks its
// data-status-url (the card's status.json: same login and organization as the page) every few
// seconds and rewrites its status, last export, "Now" and "Next export" in place, until nothing is
// in flight any more. No inline script: the portal's CSP allows scripts from our origin only.
(function () {
  "use strict";

  var FAST_MS = 2000;
  var SLOW_MS = 10000;
  var FAST_POLLS = 60; // two minutes at full speed, then every ten seconds
  var MAX_ERRORS = 5;

  function setText(card, name, value) {
    card.querySelectorAll('[data-field="' + name + '"]').forEach(function (element) {
      element.textContent = value || "";
      element.hidden = !value;
    });
  }

  function apply(card, data) {
    var label = card.querySelector('[data-field="label"]');
    if (label) {
      label.textContent = data.label;
      label.className = "status status-" + data.state;
    }
    var last = card.querySelector('[data-field="last_text"]');
    if (last) {
      // "Succeeded at <time>", the time kept on one line (a date must not break at its hyphens).
      last.textContent = data.last_at ? data.last_word + " at " : data.last_text;
      if (data.last_at) {
        var time = document.createElement("span");
        time.className = "nowrap";
        time.textContent = data.last_at;
        last.appendChild(time);
      }
      last.className = data.last_status ? "run-" + data.last_status : "";
    }
    ["last_error", "size_note", "checksum_note", "now", "next_export"].forEach(function (name) {
      setText(card, name, data[name]);
    });
    card.querySelectorAll("[data-row]").forEach(function (row) {
      row.hidden = !data[row.getAttribute("data-row")];
    });
    var button = card.querySelector('[data-field="can_export_now"]');
    if (button) {
      button.disabled = !data.can_export_now;
      if (data.can_export_now) {
        button.removeAttribute("title");
      } else {
        button.title = "An export is already queued or running";
      }
    }
    card.setAttribute("data-polling", data.in_flight ? "true" : "false");
  }

  function watch(card) {
    var polls = 0;
    var errors = 0;

    function later() {
      polls += 1;
      window.setTimeout(poll, polls > FAST_POLLS ? SLOW_MS : FAST_MS);
    }

    function poll() {
      fetch(card.getAttribute("data-status-url"), {
        credentials: "same-origin",
        headers: { Accept: "application/json" },
        cache: "no-store",
      })
        .then(function (response) {
          if (response.status === 404 || response.status === 403 || response.redirected) {
            throw new Error("stop"); // deleted, or signed out: nothing more to show here
          }
          if (!response.ok) {
            throw new Error("retry");
          }
          return response.json();
        })
        .then(function (data) {
          errors = 0;
          apply(card, data);
          if (data.in_flight) {
            later();
          }
        })
        .catch(function (error) {
          errors += 1;
          if (error.message !== "stop" && errors < MAX_ERRORS) {
            later();
          }
        });
    }

    later();
  }

  document.querySelectorAll('[data-status-url][data-polling="true"]').forEach(watch);
})();
