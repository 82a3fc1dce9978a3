<?php

declare(strict_types=1);

namespace Pont;

/**
 * Bulk Data export (FHIR Bulk Data Access 2.0): start, poll, read the files, cancel.
 *
 * @phpstan-import-type RequestOptions from Transport
 */
final class Bulk extends Module
{
    private const BASE = '/api/fhir/R4';

    /**
     * Starts an export of everything the client may read ('system'), of every patient ('patient') or of a Group's
     * members ('group', with $groupId); $params: _type, _since, _typeFilter, _outputFormat. It starts a job, so it is
     * not retried without the caller's idempotency_key (a repeat would meet the running export: 429).
     *
     * @param array{_type?: string, _since?: string, _typeFilter?: string, _outputFormat?: string} $params
     * @param RequestOptions $options
     * @return array{id: string, status_url: string}
     */
    public function export(string $level = 'system', ?string $groupId = null, array $params = [], array $options = []): array
    {
        $path = match ($level) {
            'system' => self::BASE . '/$export',
            'patient' => self::BASE . '/Patient/$export',
            'group' => self::BASE . '/Group/' . self::segment((string) $groupId) . '/$export',
            default => throw new ValidationError('bulk->export: level must be system, patient or group'),
        };
        if ($level === 'group') {
            self::required('bulk->export', ['groupId' => $groupId]);
        }
        $options['headers'] = ($options['headers'] ?? []) + ['Prefer' => 'respond-async'];
        $this->http->request('GET', $path, $params, options: $options, accept: 'application/fhir+json', repeatable: false);
        $statusUrl = $this->http->lastResponse?->headers['content-location'] ?? '';
        $parts = explode('/', rtrim($statusUrl, '/'));
        return ['id' => rawurldecode((string) end($parts)), 'status_url' => $statusUrl];
    }

    /**
     * ['status' => 'in-progress', 'progress', 'retry_after'] (the server's X-Progress and when to ask again) or
     * ['status' => 'completed', 'manifest'] (its output lists the files' url).
     *
     * @param RequestOptions $options
     * @return array{status: 'in-progress', progress: ?string, retry_after: ?float}|array{status: 'completed', manifest: array{transactionTime: string, request: string, requiresAccessToken: bool, output: list<array{type: string, url: string, count?: int}>, error: list<array{type: string, url: string}>}}
     */
    public function status(string $id, array $options = []): array
    {
        self::required('bulk->status', ['id' => $id]);
        $answer = $this->http->request('GET', self::BASE . '/$export-status/' . self::segment($id), options: $options, accept: 'application/fhir+json');
        $response = $this->http->lastResponse;
        if ($response?->status === 202) {
            $retryAfter = $response->headers['retry-after'] ?? null;
            return ['status' => 'in-progress', 'progress' => $response->headers['x-progress'] ?? null, 'retry_after' => is_numeric($retryAfter) ? (float) $retryAfter : null];
        }
        return ['status' => 'completed', 'manifest' => $answer];
    }

    /**
     * Cancels an export (or deletes a finished one) and its files.
     *
     * @param RequestOptions $options
     * @return array<string, mixed>
     */
    public function cancel(string $id, array $options = []): array
    {
        self::required('bulk->cancel', ['id' => $id]);
        return $this->http->request('DELETE', self::BASE . '/$export-status/' . self::segment($id), options: $options, accept: 'application/fhir+json');
    }

    /**
     * The resources of one output file of the manifest (its url), one line at a time: the file is downloaded to a
     * temporary file (in memory up to 2 MB), never held in one string.
     *
     * @param RequestOptions $options
     * @return \Generator<int, array<string, mixed>>
     */
    public function file(string $url, array $options = []): \Generator
    {
        self::required('bulk->file', ['url' => $url]);
        $file = $this->http->request('GET', '', options: $options, url: $this->http->sameOrigin($url), accept: 'application/fhir+ndjson', stream: true);
        try {
            while (($line = fgets($file)) !== false) {
                if (trim($line) !== '') {
                    yield json_decode($line, true, 512, JSON_THROW_ON_ERROR);
                }
            }
        } finally {
            fclose($file);
        }
    }
}
