import type { Server } from 'node:http';
import type { Socket } from 'node:net';
import { ApiError, ErrorCode, errorBody, operationOutcome } from './errors';

/** What Node's HTTP parser refuses before koa sees the request, answered with its status. */
function refusal(code: string | undefined): ApiError {
  if (code === 'HPE_HEADER_OVERFLOW')
    return new ApiError(431, ErrorCode.badRequest, 'The request line and headers are over 16 KB together: send a long FHIR search as POST [type]/_search with a form body', {
      issues: [{ severity: 'error', code: 'too-long' }],
    });
  if (code === 'ERR_HTTP_REQUEST_TIMEOUT' || code === 'HPE_REQUEST_TIMEOUT') return new ApiError(408, ErrorCode.badRequest, 'The request did not arrive whole in time');
  return new ApiError(400, ErrorCode.badRequest, 'Not a well-formed HTTP/1.1 request');
}

/**
 * The path of the last request that begins in the refused bytes (requests before it on a kept-alive connection were
 * answered), in origin form or absolute form (`GET http://host/api/fhir/R4/…`); '' when none begins there.
 */
function requestTarget(packet: Buffer | undefined): string {
  if (!packet) return '';
  const text = packet.toString('latin1');
  const starts = [...text.matchAll(/(?:^|\r\n\r\n)[A-Z]{1,16} (?:[a-z][a-z0-9+.-]*:\/\/[^/\s]*)?(\/[^\s?#]*)/gi)];
  return starts.at(-1)?.[1] ?? '';
}

/**
 * Requests the HTTP parser refuses (a request line with headers over Node's 16 KB, a malformed request line or
 * header, a request too slow to arrive) are answered in the documented shape, an OperationOutcome under `fhirBase`,
 * instead of Node's bare status line. Which route it was is read off the request line when the refused bytes hold it:
 * a request whose line came in an earlier read than the bytes refused (headers sent in pieces over a slow network), or
 * one too slow to arrive (408), gets the Error shape. The connection is closed after it: the parser cannot go on.
 */
export function answerClientErrors(server: Server, fhirBase: string): void {
  server.on('clientError', (err: NodeJS.ErrnoException & { rawPacket?: Buffer }, socket: Socket) => {
    if (err.code === 'ECONNRESET' || !socket.writable) return void socket.destroy();
    const error = refusal(err.code);
    const target = requestTarget(err.rawPacket);
    const fhir = target.startsWith(fhirBase); // as the error middleware tells FHIR routes (src/app.ts)
    const body = JSON.stringify(fhir ? operationOutcome(error) : errorBody(error));
    // Closed once written, as Node's own answer is: the client may never close its side.
    socket.end(
      `HTTP/1.1 ${error.status} ${error.status === 431 ? 'Request Header Fields Too Large' : error.status === 408 ? 'Request Timeout' : 'Bad Request'}\r\n` +
        `Content-Type: ${fhir ? 'application/fhir+json' : 'application/json'}\r\nContent-Length: ${Buffer.byteLength(body)}\r\n` +
        `Cache-Control: no-store\r\nConnection: close\r\n\r\n${body}`,
      () => socket.destroy(),
    );
  });
}
