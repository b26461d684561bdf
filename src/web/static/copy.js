// The one script of the web pages: a Copy button for a newly generated API key. Without
// JavaScript the button stays hidden and the key can still be selected and copied by hand.
// A same-origin file, so the pages' Content-Security-Policy needs no 'unsafe-inline'.
for (const button of document.querySelectorAll('button[data-copy]')) {
  const id = button.dataset.copy;
  const field = document.getElementById(id);
  const status = document.querySelector(`[data-copy-status="${id}"]`);
  if (!field) continue;
  button.hidden = false;
  field.addEventListener('focus', () => field.select());
  button.addEventListener('click', async () => {
    try {
      await navigator.clipboard.writeText(field.value);
      if (status) status.textContent = 'Copied to the clipboard.';
    } catch {
      // Clipboard access can be refused (permissions, older browsers): leave the key selected instead.
      field.focus();
      field.select();
      if (status) status.textContent = 'Press Ctrl+C (⌘C on a Mac) to copy the selected key.';
    }
  });
}
