/**
 * The portal's one style sheet and one script, served by Pont (no front-end build). Colours meet WCAG AA contrast
 * (4.5:1 for text); the layout is one column on a phone.
 */
export const PORTAL_CSS = `
*{box-sizing:border-box}
body{margin:0;font:16px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#1b1f24;background:#f6f8fa}
a{color:#0b57d0}
a:focus,button:focus,input:focus,select:focus,summary:focus{outline:3px solid #f9a825;outline-offset:2px}
.skip{position:absolute;left:-999px}.skip:focus{left:8px;top:8px;background:#fff;padding:8px;z-index:2}
header{background:#143d66;color:#fff;padding:8px 16px;display:flex;flex-wrap:wrap;gap:8px 16px;align-items:center}
header a{color:#fff}
header .who{margin-left:auto;font-size:14px}
nav ul{list-style:none;margin:0;padding:0;display:flex;flex-wrap:wrap;gap:4px 14px}
nav a[aria-current=page]{font-weight:700;text-decoration:underline}
main{max-width:1100px;margin:0 auto;padding:16px}
h1{font-size:26px;margin:8px 0 16px}
h2{font-size:20px;margin:24px 0 8px}
section,.card{background:#fff;border:1px solid #d0d7de;border-radius:6px;padding:16px;margin:0 0 16px}
table{border-collapse:collapse;width:100%;background:#fff;font-size:14px}
th,td{border-bottom:1px solid #d0d7de;padding:6px 8px;text-align:left;vertical-align:top}
th{background:#eef1f4}
.table{overflow-x:auto}
label{display:block;font-weight:600;margin:12px 0 4px}
input[type=text],input[type=email],input[type=password],input[type=url],input[type=date],input[type=datetime-local],select,textarea{width:100%;max-width:32rem;padding:8px;border:1px solid #57606a;border-radius:4px;font:inherit}
fieldset{border:1px solid #d0d7de;border-radius:4px;margin:12px 0;padding:8px 12px}
legend{font-weight:600}
.choices label{display:flex;gap:8px;align-items:baseline;font-weight:400;margin:4px 0}
button,.button{max-width:100%;overflow-wrap:anywhere;display:inline-block;padding:8px 14px;border:1px solid #143d66;border-radius:4px;background:#143d66;color:#fff;font:inherit;cursor:pointer;text-decoration:none}
button.secondary{background:#fff;color:#143d66}
button.danger{background:#a40e26;border-color:#a40e26}
form.inline{display:inline}
.row{display:flex;flex-wrap:wrap;gap:8px;align-items:end}
.error{color:#a40e26;font-weight:600;margin:4px 0}
[aria-invalid=true]{border-color:#a40e26;border-width:2px}
.notice{background:#e6f4ea;border:1px solid #1e7e34;color:#14532d;padding:8px 12px;border-radius:4px}
.alert{background:#fdecea;border:1px solid #a40e26;color:#7a0b1d;padding:8px 12px;border-radius:4px}
.secret{font-family:ui-monospace,Menlo,Consolas,monospace;background:#fff8c5;border:1px solid #9a6700;padding:8px;word-break:break-all}
code,pre{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:14px}
pre{background:#eef1f4;padding:8px;overflow-x:auto;white-space:pre-wrap;word-break:break-all}
.risk-Low{color:#14532d}.risk-Medium{color:#7a4a00}.risk-High,.risk-Critical{color:#a40e26;font-weight:700}
.muted{color:#57606a}
@media (max-width:600px){header .who{margin-left:0}th,td{padding:4px}.table table{min-width:40rem}}
`;

/** Progressive enhancement only: copy buttons. Everything works without it. */
export const PORTAL_JS = `
document.querySelectorAll('button[data-copy]').forEach(function (button) {
  button.hidden = false;
  button.addEventListener('click', function () {
    var target = document.getElementById(button.getAttribute('data-copy'));
    if (!target || !navigator.clipboard) return;
    navigator.clipboard.writeText(target.textContent.trim()).then(function () { button.textContent = 'Copied'; });
  });
});
`;
