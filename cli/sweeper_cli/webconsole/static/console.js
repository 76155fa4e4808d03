// The console's only script: the action form's preview, confirmation and submission.
// A change is a same-origin POST with the page's header token (not the cookie's value; the
// server refuses anything else).
"use strict";
(function () {
  const form = document.getElementById("act");
  if (!form) return;
  const token = document.querySelector('meta[name="sweeper-token"]').content;
  const confirmBox = document.getElementById("act-confirm");
  const question = document.getElementById("act-question");
  const result = document.getElementById("act-result");

  function request(dryRun) {
    const until = document.getElementById("act-until").value.trim();
    return {
      policy: form.dataset.policy,
      action: document.getElementById("act-action").value,
      key: form.dataset.key || null,
      tenant_id: form.dataset.tenant || null,
      reason: document.getElementById("act-reason").value.trim() || null,
      until: until || null,
      dry_run: dryRun,
    };
  }

  async function send(body) {
    const response = await fetch("/api/action", {
      method: "POST",
      credentials: "same-origin",
      headers: { "Content-Type": "application/json", "X-Sweeper-Token": token },
      body: JSON.stringify(body),
    });
    const answer = await response.json();
    if (!response.ok) throw new Error(answer.error || response.statusText);
    return answer;
  }

  function states(report) {
    const parts = Object.entries(report.from_states).map(([s, n]) => n + " " + s);
    return parts.length ? " (" + parts.join(", ") + ")" : "";
  }

  const previewButton = document.getElementById("act-preview");
  // The form never submits itself; the button works once this script is attached.
  form.addEventListener("submit", (event) => event.preventDefault());
  previewButton.addEventListener("click", async () => {
    result.textContent = "";
    try {
      const preview = await send(request(true));
      question.textContent = preview.action + " " + preview.moved + " job(s)" + states(preview) +
        " of policy " + preview.policy + ", as " + document.getElementById("operator").textContent + "?";
      confirmBox.hidden = false;
    } catch (error) {
      result.textContent = "refused: " + error.message;
    }
  });

  document.getElementById("act-no").addEventListener("click", () => {
    confirmBox.hidden = true;
    result.textContent = "nothing changed";
  });

  document.getElementById("act-yes").addEventListener("click", async () => {
    confirmBox.hidden = true;
    try {
      const done = await send(request(false));
      result.textContent = done.action + ": moved " + done.moved + " job(s)" + states(done);
      result.dataset.done = "true";
      setTimeout(() => window.location.reload(), 600);
    } catch (error) {
      result.textContent = "refused: " + error.message;
    }
  });
  previewButton.disabled = false;
})();
