// "Copy" buttons: <button type="button" class="copy" data-copy-target="ID" hidden>Copy</button>
// copies the text of the element with that id (an input's value). The buttons stay hidden
// without JavaScript, where selecting the text still works.
(function () {
  "use strict";

  function textOf(element) {
    return "value" in element && element.tagName === "INPUT" ? element.value : element.textContent;
  }

  function fallbackCopy(text) {
    var area = document.createElement("textarea");
    area.value = text;
    area.setAttribute("readonly", "");
    area.className = "copy-buffer";
    document.body.appendChild(area);
    area.select();
    var copied = false;
    try {
      copied = document.execCommand("copy");
    } catch (ignored) {
      copied = false;
    }
    document.body.removeChild(area);
    return copied ? Promise.resolve() : Promise.reject(new Error("copy refused"));
  }

  function copy(text) {
    if (navigator.clipboard && window.isSecureContext) {
      return navigator.clipboard.writeText(text).catch(function () {
        return fallbackCopy(text);
      });
    }
    return fallbackCopy(text);
  }

  document.querySelectorAll("button.copy[data-copy-target]").forEach(function (button) {
    var target = document.getElementById(button.getAttribute("data-copy-target"));
    if (!target) {
      return;
    }
    var label = button.textContent;
    button.hidden = false;
    button.addEventListener("click", function () {
      copy(textOf(target).trim()).then(
        function () {
          button.textContent = "Copied";
        },
        function () {
          button.textContent = "Select and copy";
        }
      );
      window.setTimeout(function () {
        button.textContent = label;
      }, 2000);
    });
  });
})();
