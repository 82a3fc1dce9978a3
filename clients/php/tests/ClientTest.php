<?php

declare(strict_types=1);

namespace Pont\Tests;

use PHPUnit\Framework\TestCase;
use Pont\BridgeAgent;
use Pont\PatientApp;
use Pont\Pont;
use Pont\Transport;
use Pont\Webhooks;

/** The conformance suite (clients/conformance) for the PHP library. */
final class ClientTest extends TestCase
{
    private const CONFORMANCE = __DIR__ . '/../../conformance/';
    private const OK = [200, ['x-request-id' => 'req-ok'], ['ok' => true]];

    /** @var resource|null */
    private static $server = null;
    /** @var array<int, resource> */
    private static array $pipes = [];
    /** @var array<string, mixed> */
    private static array $info = [];

    /** @return array<string, mixed> */
    private static function vectors(): array
    {
        return json_decode((string) file_get_contents(self::CONFORMANCE . 'vectors.json'), true, 512, JSON_THROW_ON_ERROR);
    }

    /**
     * A sender that answers the token endpoint, then each of $answers ([status, headers, body], or a NetworkError to
     * throw) in turn, recording every other request in $calls.
     *
     * @param list<mixed> $answers
     * @param list<array<string, mixed>> $calls
     */
    private static function fakeSender(array &$answers, array &$calls, int $tokenExpires = 3600): callable
    {
        $tokens = 0;
        return static function (string $method, string $url, array $headers, ?string $body, float $connectTimeout, float $timeout) use (&$answers, &$calls, &$tokens, $tokenExpires): array {
            if (str_ends_with($url, '/auth/token')) {
                $tokens++;
                return [200, [], json_encode(['access_token' => "tok-$tokens", 'expires_in' => $tokens === 1 ? $tokenExpires : 3600])];
            }
            $calls[] = ['method' => $method, 'url' => $url, 'headers' => $headers, 'body' => $body, 'timeout' => $timeout];
            $answer = array_shift($answers);
            if ($answer instanceof \Throwable) {
                throw $answer;
            }
            [$status, $resHeaders, $resBody] = $answer;
            return [$status, array_change_key_case($resHeaders), is_string($resBody) ? $resBody : json_encode($resBody)];
        };
    }

    /** @param list<mixed> $answers @param list<array<string, mixed>> $calls */
    private static function client(array &$answers, array &$calls, mixed ...$settings): Pont
    {
        return new Pont(...$settings + ['clientId' => 'cli_x', 'clientSecret' => 'pcs_x', 'baseUrl' => 'http://pont.invalid', 'sender' => self::fakeSender($answers, $calls), 'sleep' => static fn () => null]);
    }

    public function testSignatureVectors(): void
    {
        $v = self::vectors();
        foreach ($v['signatures'] as $case) {
            $check = static fn () => Webhooks::verifySignature($case['raw_body'], $case['header'], $v['secret'], $v['tolerance'], $v['now']);
            if ($case['valid']) {
                self::assertTrue($check(), $case['name']);
                self::assertSame('lab_result.released', Webhooks::parseEvent($case['raw_body'], $case['header'], $v['secret'], $v['tolerance'], $v['now'])['type']);
            } else {
                try {
                    $check();
                    self::fail("accepted: {$case['name']}");
                } catch (\Pont\WebhookSignatureError $e) {
                    self::assertInstanceOf(\Pont\PontError::class, $e);
                }
            }
        }
    }

    public function testErrorVectors(): void
    {
        foreach (self::vectors()['errors'] as $case) {
            $answers = [[$case['status'], $case['headers'], $case['body']], [$case['status'], $case['headers'], $case['body']]]; // a 401: once more
            $calls = [];
            $pont = self::client($answers, $calls, maxRetries: 0);
            try {
                $pont->healthIds->verify('CM482930174629');
                self::fail("no exception: {$case['name']}");
            } catch (\Pont\PontError $e) {
                self::assertInstanceOf('Pont\\' . $case['exception'], $e, $case['name']);
                self::assertInstanceOf(\Pont\ServiceException::class, $e); // the deprecated name still catches
                self::assertSame($case['status'], $e->status);
                self::assertSame($case['error_code'], $e->errorCode);
                self::assertSame($case['headers']['x-request-id'] ?? null, $e->requestId);
                if (isset($case['retry_after'])) {
                    self::assertSame((float) $case['retry_after'], $e->retryAfter);
                }
                self::assertStringNotContainsString('pcs_x', $e->getMessage());
            }
        }
    }

    public function testBackoffAndRetryAfterVectors(): void
    {
        $retry = self::vectors()['retry'];
        $d = $retry['defaults'];
        foreach ($retry['backoff'] as $v) {
            $headers = $v['retry_after'] !== null ? ['retry-after' => $v['retry_after']] : [];
            $error = \Pont\PontError::fromResponse(503, ['status' => 'error'], $headers);
            $bounds = [];
            foreach ([0.0, 0.999999] as $r) {
                $t = new Transport('http://x', random: static fn () => $r, wallClock: static fn () => (float) ($v['now'] ?? microtime(true)));
                self::assertSame([$d['max_retries'], $d['base_delay_ms'] / 1000, (float) ($d['max_delay_ms'] / 1000), (float) ($d['timeout_ms'] / 1000), (float) ($d['deadline_ms'] / 1000)],
                    [$t->maxRetries, $t->backoff, $t->maxBackoff, $t->timeout, $t->deadline]);
                $bounds[] = $t->delay($v['retry'] - 1, $error, $headers);
            }
            if (isset($v['deadline_remaining_ms'])) { // through a call: the wait would pass the deadline
                $answers = [[503, $headers, ['status' => 'error']], self::OK];
                $calls = [];
                $pont = self::client($answers, $calls, clock: static fn () => 0.0, deadline: $v['deadline_remaining_ms'] / 1000);
                try {
                    $pont->healthIds->verify('CM482930174629');
                    self::fail($v['name']);
                } catch (\Pont\ServerError) {
                    self::assertCount(1, $calls, $v['name']);
                }
            } elseif ($v['delay_ms'] === null) {
                self::assertSame([null, null], $bounds, $v['name']);
            } else {
                self::assertEqualsWithDelta($v['delay_ms'][0], $bounds[0] * 1000, 1, $v['name']);
                self::assertEqualsWithDelta($v['delay_ms'][1], $bounds[1] * 1000, 1, $v['name']);
            }
        }
    }

    public function testWhichCallsAreRetried(): void
    {
        foreach (self::vectors()['retry']['decisions'] as $v) {
            $name = "{$v['method']} key=" . json_encode($v['idempotency_key']) . " {$v['outcome']}";
            $outcome = $v['outcome'];
            $first = match ($outcome) {
                'network' => new \Pont\NetworkError('reset'),
                'timeout' => new \Pont\TimeoutError('timed out'),
                default => [$outcome, [], ['status' => 'error', 'error_code' => 'X', 'message' => 'm']],
            };
            $answers = [$first, self::OK];
            $calls = [];
            $pont = self::client($answers, $calls);
            $transport = (new \ReflectionProperty(Pont::class, 'http'))->getValue($pont);
            $call = static fn () => $transport->request($v['method'], '/api/fhir/R4/Patient/1', options: $v['idempotency_key'] ? ['idempotency_key' => 'k-1'] : []);
            if ($v['retry']) {
                self::assertSame(['ok' => true], $call(), $name);
                self::assertCount(2, $calls, $name);
            } else {
                try {
                    $call();
                    self::fail("no error: $name");
                } catch (\Pont\PontError $e) {
                    self::assertInstanceOf($outcome === 'timeout' ? \Pont\TimeoutError::class : ($outcome === 'network' ? \Pont\NetworkError::class : \Pont\PontError::class), $e, $name);
                    self::assertCount(1, $calls, $name);
                }
            }
        }
    }

    public function testKeyByDefaultAndCallsRetriedLikeGet(): void
    {
        $busy = [503, [], 'busy'];
        $answers = [$busy, self::OK, $busy, self::OK, $busy, self::OK, $busy, self::OK];
        $calls = [];
        $pont = self::client($answers, $calls);
        $pont->records->pushEncounter(['health_id' => 'CM482930174629', 'encounter_type' => 'visit']);
        self::assertCount(1, array_unique(array_map(static fn ($c) => $c['headers']['Idempotency-Key'], $calls)));
        self::assertMatchesRegularExpression('/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/', $calls[0]['headers']['Idempotency-Key']);
        $pont->fhir->searchPost('Observation', ['code' => 'x']);
        self::assertArrayNotHasKey('Idempotency-Key', $calls[3]['headers']);
        self::assertSame('code=x', $calls[3]['body']);
        $agent = new BridgeAgent(agentId: 'agt_1', agentKey: 'k', facilityId: 'fac-1', baseUrl: 'http://pont.invalid', settings: ['sender' => self::fakeSender($answers, $calls), 'sleep' => static fn () => null]);
        $agent->heartbeat('1.0');
        $agent->sync([['resourceType' => 'Patient', 'id' => 'p1'], ['resourceType' => 'Encounter', 'id' => 'e1']], 'batch-7', [], [[0, 1]]);
        self::assertSame([null, null, 'batch-7', 'batch-7'], array_map(static fn ($c) => $c['headers']['Idempotency-Key'] ?? null, array_slice($calls, 4)));
        self::assertSame([[0, 1]], json_decode($calls[7]['body'], true)['groups']);
        self::assertSame('k', $calls[4]['headers']['X-Bridge-Agent-Key']);
        self::assertCount(8, $calls);
    }

    public function testBulkExportKickOffPollFilesCancel(): void
    {
        $statusUrl = 'http://pont.invalid/api/fhir/R4/$export-status/job%201';
        $answers = [
            [503, [], 'busy'], // a kick-off starts a job: not retried without the caller's key
            [202, ['content-location' => $statusUrl], ''],
            [202, ['x-progress' => '2 of 5 types', 'retry-after' => '3'], ''],
            [200, [], ['transactionTime' => 't', 'output' => [['type' => 'Patient', 'url' => 'http://public.example/api/fhir/R4/$export-status/job1/file/1']]]],
            [200, [], "{\"resourceType\":\"Patient\",\"id\":\"a\"}\n\n{\"resourceType\":\"Patient\",\"id\":\"b\"}\n"],
            [202, [], ['resourceType' => 'OperationOutcome', 'issue' => []]],
            [503, [], 'busy'], self::OK, // $validate has no effect: retried like a GET
        ];
        $calls = [];
        $pont = self::client($answers, $calls);
        try {
            $pont->bulk->export();
            self::fail('no ServerError');
        } catch (\Pont\ServerError) {
            self::assertCount(1, $calls);
        }
        $job = $pont->bulk->export('group', 'g1', ['_type' => 'Patient,Observation']);
        self::assertSame(['id' => 'job 1', 'status_url' => $statusUrl], $job);
        self::assertSame(['GET', 'respond-async'], [$calls[1]['method'], $calls[1]['headers']['Prefer']]);
        self::assertSame('http://pont.invalid/api/fhir/R4/Group/g1/$export?_type=Patient%2CObservation', $calls[1]['url']);
        self::assertSame(['status' => 'in-progress', 'progress' => '2 of 5 types', 'retry_after' => 3.0], $pont->bulk->status($job['id']));
        $done = $pont->bulk->status($job['id']);
        self::assertSame('completed', $done['status']);
        self::assertSame(['a', 'b'], array_column(iterator_to_array($pont->bulk->file($done['manifest']['output'][0]['url']), false), 'id'));
        self::assertSame('http://pont.invalid/api/fhir/R4/$export-status/job1/file/1', $calls[4]['url']); // on our base URL
        self::assertSame('application/fhir+ndjson', $calls[4]['headers']['Accept']);
        $pont->bulk->cancel($job['id']);
        self::assertSame(['DELETE', 202], [$calls[5]['method'], $pont->lastResponse()->status]);
        self::assertSame(['ok' => true], $pont->fhir->validate(['resourceType' => 'Patient'], 'p1', 'update'));
        self::assertSame('http://pont.invalid/api/fhir/R4/Patient/p1/$validate?mode=update', $calls[7]['url']);
        try {
            $pont->bulk->export('group');
            self::fail('accepted');
        } catch (\Pont\ValidationError $e) {
            self::assertStringContainsString('groupId is required', $e->getMessage());
        }
    }

    public function testABulkFileGoesThroughATemporaryFile(): void
    {
        $router = tempnam(sys_get_temp_dir(), 'pont-router') . '.php';
        file_put_contents($router, <<<'PHP'
            <?php
            if ($_SERVER['REQUEST_METHOD'] === 'POST') {
                header('Content-Type: application/json');
                echo '{"access_token":"t","expires_in":3600}';
                return true;
            }
            header('Content-Type: application/fhir+ndjson');
            for ($i = 0; $i < 3000; $i++) {
                echo json_encode(['resourceType' => 'Observation', 'id' => "o$i", 'note' => str_repeat('x', 1000)]), "\n";
            }
            return true;
            PHP);
        [$server, $port] = self::stubServer($router);
        try {
            $pont = new Pont(clientId: 'cli_x', clientSecret: 'pcs_x', baseUrl: "http://127.0.0.1:$port");
            $before = memory_get_usage();
            $count = 0;
            $peak = 0;
            foreach ($pont->bulk->file('http://public.example/api/fhir/R4/$export-status/j/file/1') as $resource) {
                $count += $resource['resourceType'] === 'Observation' ? 1 : 0;
                $peak = max($peak, memory_get_usage() - $before);
            }
            self::assertSame(3000, $count);
            self::assertLessThan(1_000_000, $peak); // the 3 MB file is never one string
        } finally {
            self::stopServer($server);
            unlink($router);
        }
    }

    public function testCancelledBeforeTheCallSendsNothing(): void
    {
        $answers = [self::OK];
        $calls = [];
        $requests = 0;
        $pont = self::client($answers, $calls, onRequest: static function () use (&$requests): void {
            $requests++;
        });
        try {
            $pont->healthIds->verify('CM482930174629', [], ['cancel' => static fn (): bool => true]);
            self::fail('not cancelled');
        } catch (\Pont\CancelledError $e) {
            self::assertInstanceOf(\Pont\PontError::class, $e);
            self::assertNotInstanceOf(\Pont\NetworkError::class, $e);
        }
        self::assertSame([0, []], [$requests, $calls]); // not even the token
        try {
            $pont->healthIds->verify('CM482930174629', [], ['cancel' => true]);
            self::fail('accepted');
        } catch (\Pont\ValidationError $e) {
            self::assertStringContainsString('cancel must be a callable', $e->getMessage());
        }
    }

    public function testCancelledDuringTheWaitBetweenAttempts(): void
    {
        $answers = [[503, ['retry-after' => '30'], 'busy'], self::OK];
        $calls = [];
        $ended = null;
        $pont = self::client($answers, $calls, sleep: null, onResponse: static function (array $r) use (&$ended): void {
            $ended = hrtime(true) / 1e9; // the real sleep: waits in slices, asking 'cancel'
        });
        // The caller changes its mind 0.2 s into the 30 s wait.
        $cancel = static function () use (&$ended): bool {
            return $ended !== null && hrtime(true) / 1e9 - $ended > 0.2;
        };
        $started = hrtime(true) / 1e9;
        try {
            $pont->healthIds->verify('CM482930174629', [], ['cancel' => $cancel]);
            self::fail('not cancelled');
        } catch (\Pont\CancelledError $e) {
            self::assertStringContainsString('before attempt 1', $e->getMessage());
        }
        self::assertLessThan(10.0, hrtime(true) / 1e9 - $started); // not the 30 s of Retry-After
        self::assertCount(1, $calls); // no further attempt

        // A test's sleep is called as it is, then 'cancel' asked.
        $answers = [[503, [], 'busy'], self::OK];
        $calls = [];
        $slept = [];
        $pont = self::client($answers, $calls, random: static fn () => 0.5, sleep: static function (float $s) use (&$slept): void {
            $slept[] = $s;
        });
        try {
            $pont->healthIds->verify('CM482930174629', [], ['cancel' => static function () use (&$slept): bool {
                return $slept !== [];
            }]);
            self::fail('not cancelled');
        } catch (\Pont\CancelledError) {
        }
        self::assertSame([[0.25], 1], [$slept, count($calls)]);
    }

    public function testCancelledWhileTheAnswerIsAwaitedAbortsTheTransfer(): void
    {
        $dir = sys_get_temp_dir() . '/pont-cancel-' . bin2hex(random_bytes(6));
        mkdir($dir);
        $router = "$dir/router.php";
        file_put_contents($router, <<<'PHP'
            <?php
            header('Content-Type: application/json');
            if ($_SERVER['REQUEST_METHOD'] === 'POST') {
                echo '{"access_token":"t","expires_in":3600}';
                return true;
            }
            if (!file_exists(__DIR__ . '/arrived')) { // the first GET: a slow answer, until the test ends
                touch(__DIR__ . '/arrived');
                for ($i = 0; $i < 600 && !file_exists(__DIR__ . '/release'); $i++) {
                    usleep(50_000);
                }
            }
            echo '{"valid":true}';
            return true;
            PHP);
        [$server, $port] = self::stubServer($router, ['PHP_CLI_SERVER_WORKERS' => '3']);
        try {
            $responses = [];
            $pont = new Pont(clientId: 'cli_x', clientSecret: 'pcs_x', baseUrl: "http://127.0.0.1:$port", onResponse: static function (array $r) use (&$responses): void {
                $responses[] = $r;
            });
            // Cancel once the server has the request (curl asks while it waits for the answer).
            $cancel = static fn (): bool => file_exists("$dir/arrived");
            $started = hrtime(true) / 1e9;
            try {
                $pont->healthIds->verify('CM482930174629', [], ['cancel' => $cancel]);
                self::fail('not cancelled');
            } catch (\Pont\CancelledError $e) {
                self::assertStringContainsString('during attempt 0', $e->getMessage());
            }
            self::assertLessThan(10.0, hrtime(true) / 1e9 - $started); // the answer would come after 30 s
            self::assertCount(2, $responses); // the token, then the aborted attempt: not retried
            self::assertInstanceOf(\Pont\CancelledError::class, $responses[1]['error']);
            // The handle is reset between requests: a call without 'cancel' is not aborted by the last one's callback.
            self::assertSame(['valid' => true], $pont->healthIds->verify('CM482930174629'));
            self::assertSame(['valid' => true], $pont->healthIds->verify('CM482930174629', [], ['cancel' => static fn (): bool => false]));
        } finally {
            touch("$dir/release");
            self::stopServer($server);
            array_map('unlink', glob("$dir/*"));
            rmdir($dir);
        }
    }

    public function testPagingVectors(): void
    {
        $lastPage = [200, [], ['resourceType' => 'Bundle', 'entry' => [], 'items' => [], 'deliveries' => []]];
        foreach (self::vectors()['paging'] as $v) {
            $answers = [[200, [], $v['page']]];
            $calls = [];
            $pont = self::client($answers, $calls);
            [$module, $method, $arguments] = match ($v['kind']) {
                'fhir' => [$pont->fhir, 'search', ['Observation']],
                'cursor' => [$pont->webhooks, 'deliveries', []],
                default => [$pont->inventory, 'pharmacyStock', []],
            };
            // The list method answers the first page as it came: a plain array.
            $first = $module->{$method}(...$arguments);
            self::assertTrue(is_array($first), $v['name']);
            self::assertEquals($v['page'], $first, $v['name']);

            // The explicit iterator: every item of this page and of the next (empty) one; one request per page.
            $answers = [[200, [], $v['page']], $lastPage];
            $calls = [];
            $iterator = $module->autoPagingIterator($method, ...$arguments);
            self::assertSame([], $calls, 'nothing is fetched before the iteration starts');
            $items = iterator_to_array($iterator);
            $ids = array_map(static fn ($i) => $v['kind'] === 'fhir' ? "{$i['resourceType']}/{$i['id']}" : $i['id'], $items);
            self::assertSame($v['items'], $ids, $v['name']);
            self::assertCount($v['next'] === null ? 1 : 2, $calls, $v['name']);
            $answers = [[200, [], $v['page']], $lastPage];
            $pages = iterator_to_array($module->pages($method, ...$arguments), false);
            self::assertEquals($v['next'] === null ? [$v['page']] : [$v['page'], $lastPage[2]], $pages, $v['name']);
            if ($v['next'] === null) {
                continue;
            }
            if ($v['kind'] === 'fhir') { // the next link's path and query, on our base URL (credentials stay there)
                self::assertSame('http://pont.invalid' . substr($v['next'], strlen('http://x')), $calls[1]['url']);
            } else {
                foreach ($v['next'] as $name => $value) {
                    self::assertStringContainsString("$name=$value", $calls[1]['url'], $v['name']);
                }
            }
        }
    }

    public function testOptionHeadersAndUserAgent(): void
    {
        foreach (self::vectors()['options']['headers'] as $v) {
            $answers = [self::OK];
            $calls = [];
            self::client($answers, $calls)->patients->getSummary('CM482930174629', [$v['option'] => $v['value']]);
            self::assertSame($v['value'], $calls[0]['headers'][$v['header']]);
            self::assertSame('pont-php/' . Pont::VERSION, $calls[0]['headers']['User-Agent']);
        }
    }

    public function testConstructorMakesNoRequestAndRequestIdsAreKept(): void
    {
        $answers = [[201, ['x-request-id' => 'req-201'], ['lab_result_id' => 'x']]];
        $calls = [];
        $tokens = 0;
        $sender = self::fakeSender($answers, $calls);
        $pont = new Pont(clientId: 'cli_x', clientSecret: 'pcs_x', baseUrl: 'http://pont.invalid', sender: static function (...$args) use ($sender, &$tokens) {
            $tokens += str_ends_with($args[1], '/auth/token') ? 1 : 0;
            return $sender(...$args);
        });
        self::assertSame([0, []], [$tokens, $calls]);
        $pont->records->pushLabResult(['health_id' => 'CM482930174629', 'test_name' => 'K', 'result_value' => '4', 'flagged' => false]);
        self::assertSame(['req-201', 201], [$pont->lastResponse()->requestId, $pont->lastResponse()->status]);
        self::assertSame(1, $tokens);
    }

    public function testRetriesKeepTheKeyWaitTheRightTimeAndRefreshTheToken(): void
    {
        $answers = [
            [429, [], ['status' => 'error', 'error_code' => 'RATE_LIMITED', 'message' => 'slow down', 'retry_after' => 0]],
            [503, [], '<html>busy</html>'],
            [201, [], ['lab_result_id' => 'x']],
            [422, [], ['status' => 'error', 'error_code' => 'VALIDATION_FAILED', 'message' => 'bad']],
        ];
        $calls = [];
        $slept = [];
        $pont = new Pont(clientId: 'cli_x', clientSecret: 'pcs_x', baseUrl: 'http://pont.invalid', sender: self::fakeSender($answers, $calls, 30),
            sleep: static function (float $s) use (&$slept): void {
                $slept[] = $s;
            }, random: static fn () => 0.5);
        $fields = ['health_id' => 'CM482930174629', 'test_name' => 'K', 'result_value' => '4', 'flagged' => false];
        self::assertSame(['lab_result_id' => 'x'], $pont->records->pushLabResult($fields));
        self::assertSame([0.0, 0.5], $slept); // Retry-After 0, then half of the second retry's 1 s
        self::assertCount(1, array_unique(array_map(static fn ($c) => $c['headers']['Idempotency-Key'], $calls)));
        try {
            $pont->records->pushLabResult($fields);
            self::fail('a 422 accepted');
        } catch (\Pont\ValidationError) {
            self::assertCount(4, $calls); // a 422 is never retried
        }
        // The first token expires within 60 s: the next attempt fetched a new one.
        self::assertSame(['Bearer tok-1', 'Bearer tok-2', 'Bearer tok-2', 'Bearer tok-2'], array_map(static fn ($c) => $c['headers']['Authorization'], $calls));
    }

    public function testPerCallOptionsHooksAndHeaderInjection(): void
    {
        $answers = [[503, ['x-request-id' => 'req-1'], 'busy'], [503, ['x-request-id' => 'req-2'], 'busy'], self::OK];
        $calls = [];
        $seen = [];
        $pont = self::client($answers, $calls, onRequest: static function (array $r) use (&$seen): void {
            $seen[] = ['request', $r['attempt'], $r['headers']['Authorization'] ?? null];
        }, onResponse: static function (array $r) use (&$seen): void {
            $seen[] = ['response', $r['attempt'], $r['status'], $r['request_id']];
        });
        try {
            $pont->healthIds->verify('CM482930174629', [], ['max_retries' => 1, 'timeout' => 2.5, 'headers' => ['X-Trace' => 't-1']]);
            self::fail('no error');
        } catch (\Pont\ServerError $e) {
            self::assertSame('req-2', $e->requestId);
        }
        self::assertSame([2.5, 2.5], array_column($calls, 'timeout'));
        self::assertSame('t-1', $calls[0]['headers']['X-Trace']);
        self::assertSame([['request', 0, null], ['response', 0, 200, null], ['request', 0, '***'], ['response', 0, 503, 'req-1'],
            ['request', 1, '***'], ['response', 1, 503, 'req-2']], $seen);
        foreach ([[['headers' => ['X-Trace' => "a\r\nX-Evil: 1"]], 'line breaks'], [['retries' => 2], 'unknown option']] as [$options, $message]) {
            try {
                $pont->healthIds->verify('CM482930174629', [], $options);
                self::fail("accepted: $message");
            } catch (\Pont\ValidationError $e) {
                self::assertStringContainsString($message, $e->getMessage());
            }
        }
        self::assertCount(2, $calls);
    }

    public function testAnAttemptNeverOutlivesTheDeadline(): void
    {
        $now = 0.0;
        $answers = [new \Pont\TimeoutError('timed out'), self::OK];
        $calls = [];
        $pont = self::client($answers, $calls, clock: static function () use (&$now): float {
            return $now;
        }, sleep: static function (float $s) use (&$now): void {
            $now += $s;
        }, random: static fn () => 1.0, deadline: 10.0, timeout: 30.0);
        $pont->healthIds->verify('CM482930174629');
        self::assertSame([10.0, 9.5], array_column($calls, 'timeout')); // each attempt gets what is left
    }

    public function testNextTokensUseTheRotatedSecret(): void
    {
        $secretsUsed = [];
        $send = static function (string $method, string $url, array $headers, ?string $body) use (&$secretsUsed): array {
            $sent = json_decode($body ?? '{}', true) ?? [];
            if (str_ends_with($url, '/auth/token')) {
                $secretsUsed[] = $sent['client_secret'];
                return [200, [], json_encode(['access_token' => 't', 'expires_in' => 3600])];
            }
            if (str_ends_with($url, '/api/v1/connect/auth/clients/cli_x/rotate-secret')) {
                return [200, [], json_encode(['client_id' => 'cli_x', 'client_secret' => 'pcs_new', 'previous_secret_expires_at' => null, 'overlap' => $sent['overlap_seconds'] ?? null])];
            }
            return [200, [], '{}'];
        };
        $pont = new Pont(clientId: 'cli_x', clientSecret: 'pcs_old', baseUrl: 'http://pont.invalid', sender: $send);
        $rotated = $pont->auth->rotateClientSecret(0);
        self::assertSame(['pcs_new', 0], [$rotated['client_secret'], $rotated['overlap']]);
        $pont->webhooks->list();
        self::assertSame(['pcs_old', 'pcs_new'], $secretsUsed);
    }

    public function testMissingArgumentFailsBeforeAnyRequest(): void
    {
        foreach (['pont.example', 'ftp://pont.example', 'http://'] as $bad) {
            try {
                new Pont(clientId: 'cli_x', clientSecret: 'pcs_x', baseUrl: $bad);
                self::fail("accepted: $bad");
            } catch (\Pont\ValidationError $e) {
                self::assertStringContainsString('baseUrl must be an http(s) URL', $e->getMessage());
            }
        }
        $answers = [];
        $calls = [];
        $pont = self::client($answers, $calls);
        try {
            $pont->records->pushLabResult(['health_id' => 'CM482930174629']);
            self::fail('accepted');
        } catch (\Pont\ValidationError $e) {
            self::assertStringContainsString('test_name is required', $e->getMessage());
        }
        self::assertSame([], $calls);

        // The explicit iterators check their arguments at once, and page only the lists.
        foreach ([
            ['healthId is required', static fn () => $pont->records->autoPagingIterator('get', '')],
            ['resourceType is required', static fn () => $pont->fhir->pages('search', '')],
            ['Fhir: read is not a list (the lists: ', static fn () => $pont->fhir->autoPagingIterator('read', 'Patient', '1')],
            ['Fhir: nope is not a list', static fn () => $pont->fhir->autoPagingIterator('nope')],
        ] as [$message, $call]) {
            try {
                $call();
                self::fail("accepted: $message");
            } catch (\Pont\ValidationError $e) {
                self::assertStringContainsString($message, $e->getMessage());
            }
        }
        self::assertSame([], $calls);
    }

    public function testDiscoveryFetchesNoTokenAndAPatientAppSendsItsOwn(): void
    {
        $answers = [self::OK, self::OK, self::OK, [503, [], ['status' => 'unavailable', 'checks' => ['database' => 'failing']]]];
        $calls = [];
        $pont = self::client($answers, $calls);
        $pont->system->healthz();
        $pont->discovery->jwks();
        $pont->discovery->openapi();
        try {
            $pont->system->readyz(['max_retries' => 0]);
            self::fail('not ready, no error');
        } catch (\Pont\ServerError $e) {
            self::assertSame('unavailable', $e->body['status']);
        }
        self::assertSame([['http://pont.invalid/healthz', null], ['http://pont.invalid/.well-known/jwks.json', null], ['http://pont.invalid/api/openapi.json', null], ['http://pont.invalid/readyz', null]],
            array_map(static fn ($c) => [$c['url'], $c['headers']['Authorization'] ?? null], $calls));

        $unauthenticated = [401, [], ['status' => 'error', 'error_code' => 'UNAUTHENTICATED', 'message' => 'expired']];
        $answers = [[503, [], 'busy'], [200, [], ['items' => []]], [503, [], 'busy'], $unauthenticated];
        $calls = [];
        $settings = ['sender' => self::fakeSender($answers, $calls), 'sleep' => static fn () => null];
        $app = new PatientApp(baseUrl: 'http://pont.invalid', token: 'pat_secret_value', settings: $settings);
        self::assertStringNotContainsString('secret_value', print_r($app, true));
        self::assertSame(['items' => []], $app->consents()); // a read: retried
        foreach ([[\Pont\ServerError::class, static fn () => $app->approveRequest('cr 1')], [\Pont\AuthenticationError::class, static fn () => $app->accessLog()]] as [$class, $call]) {
            try {
                $call(); // a write without a key: once; a pat_ token is not renewed: once
                self::fail("no $class");
            } catch (\Pont\PontError $e) {
                self::assertInstanceOf($class, $e);
            }
        }
        self::assertSame([
            ['GET', 'http://pont.invalid/api/v1/mobile/consents', 'Bearer pat_secret_value', null],
            ['GET', 'http://pont.invalid/api/v1/mobile/consents', 'Bearer pat_secret_value', null],
            ['POST', 'http://pont.invalid/api/v1/mobile/consent-requests/cr%201/approve', 'Bearer pat_secret_value', null],
            ['GET', 'http://pont.invalid/api/v1/mobile/access-log', 'Bearer pat_secret_value', null],
        ], array_map(static fn ($c) => [$c['method'], $c['url'], $c['headers']['Authorization'] ?? null, $c['headers']['Idempotency-Key'] ?? null], $calls));
        try {
            (new PatientApp(baseUrl: 'http://pont.invalid', settings: $settings))->consents();
            self::fail('no token, yet a request');
        } catch (\Pont\ValidationError $e) {
            self::assertStringContainsString('no patient token', $e->getMessage());
        }
        try {
            $app->signIn('CM482930174629', '');
            self::fail('no code, yet a request');
        } catch (\Pont\ValidationError $e) {
            self::assertStringContainsString('code is required', $e->getMessage());
        }
        self::assertCount(4, $calls);
    }

    public function testEveryOperationOfTheSurfaceHasAMethod(): void
    {
        $answers = [];
        $calls = [];
        $pont = self::client($answers, $calls);
        $named = 0;
        foreach (json_decode((string) file_get_contents(self::CONFORMANCE . 'surface.json'), true)['operations'] as $operation => $names) {
            if (isset($names['excluded'])) {
                self::assertNotSame('', $names['excluded']);
                continue;
            }
            [$head, $method] = explode('.', $names['php']);
            $owner = ctype_upper($head[0]) ? 'Pont\\' . $head : $pont->{$head};
            self::assertTrue(method_exists($owner, $method), "$operation: {$names['php']}");
            $named++;
        }
        self::assertGreaterThan(60, $named);

        // Beside the operations: the eager Pont::create (static) and the paging of a list.
        $library = json_decode((string) file_get_contents(self::CONFORMANCE . 'surface.json'), true)['library'];
        foreach ($library as $name => $names) {
            [$owner, $method] = explode('.', $names['php']);
            self::assertTrue(method_exists('Pont\\' . $owner, $method), "$name: {$names['php']}");
        }
        self::assertTrue((new \ReflectionMethod(Pont::class, 'create'))->isStatic());
        foreach (['fhir', 'records', 'webhooks', 'inventory'] as $module) {
            self::assertContains(\Pont\Paging::class, class_uses($pont->{$module}), $module);
        }
        self::assertContains(\Pont\Paging::class, class_uses(PatientApp::class));
    }

    /** @return array<string, mixed> */
    /**
     * Ends a stub server and the workers PHP_CLI_SERVER_WORKERS forked for it: a SIGTERM to the server ends it alone,
     * and its workers would outlive the test run.
     *
     * @param resource $server
     */
    private static function stopServer($server): void
    {
        $pid = (string) proc_get_status($server)['pid'];
        foreach (glob('/proc/[0-9]*/stat') ?: [] as $stat) {
            // pid (comm) state ppid …: the fields after the command's name, which may hold spaces.
            $line = (string) @file_get_contents($stat);
            $after = explode(' ', substr($line, (int) strrpos($line, ')') + 2));
            if (($after[1] ?? null) === $pid) {
                posix_kill((int) $line, 15);
            }
        }
        proc_terminate($server);
        proc_close($server);
    }

    /**
     * `php -S` with the router on a port the system just gave out (a random one could be taken), once it accepts
     * connections: a loaded machine may take seconds to start it, and a test against a server that never came up
     * would fail for the wrong reason.
     *
     * @param array<string, string> $env
     * @return array{0: resource, 1: int}
     */
    private static function stubServer(string $router, array $env = []): array
    {
        $free = stream_socket_server('tcp://127.0.0.1:0');
        self::assertNotFalse($free);
        $port = (int) substr((string) strrchr((string) stream_socket_get_name($free, false), ':'), 1);
        fclose($free);
        $server = proc_open([PHP_BINARY, '-S', "127.0.0.1:$port", $router], [1 => ['file', '/dev/null', 'w'], 2 => ['file', '/dev/null', 'w']], $pipes, null, $env + getenv());
        self::assertIsResource($server);
        for ($i = 0; $i < 600 && @fsockopen('127.0.0.1', $port) === false; $i++) {
            usleep(50_000);
        }
        self::assertNotFalse(@fsockopen('127.0.0.1', $port), "the stub server on port $port did not start in 30 s");
        return [$server, $port];
    }

    private static function server(): array
    {
        if (self::$server === null) {
            self::$server = proc_open(['node', self::CONFORMANCE . 'server.mjs'], [0 => ['pipe', 'r'], 1 => ['pipe', 'w'], 2 => STDERR], self::$pipes);
            self::$info = json_decode((string) fgets(self::$pipes[1]), true, 512, JSON_THROW_ON_ERROR);
        }
        return self::$info;
    }

    public static function tearDownAfterClass(): void
    {
        if (self::$server !== null) {
            fclose(self::$pipes[0]);
            fclose(self::$pipes[1]);
            proc_close(self::$server);
            self::$server = null;
        }
    }

    /** A client of the every-scope integrator through the fault proxy; $slept records the waits. @param list<float> $slept */
    private static function proxied(array &$slept = []): Pont
    {
        $info = self::server();
        $full = $info['demo']['clients'][0];
        return new Pont(clientId: $full['client_id'], clientSecret: $full['client_secret'], baseUrl: $info['fault_url'], sleep: static function (float $s) use (&$slept): void {
            $slept[] = $s;
        });
    }

    /** @return array{0: string, 1: array<string, string>} */
    private static function fault(string $mode): array
    {
        $token = "php-$mode-" . bin2hex(random_bytes(8));
        return [$token, ['X-Conformance-Fault' => "$mode; id=$token"]];
    }

    /** @return array{received: int, forwarded: int, idempotency_keys: list<?string>} */
    private static function faultCounts(string $token): array
    {
        return json_decode((string) file_get_contents(self::server()['fault_url'] . "/__conformance/requests?id=$token"), true);
    }

    public function testFaults(): void
    {
        $info = self::server();
        $slept = [];
        $pont = self::proxied($slept);
        $hid = $info['demo']['patients'][0]['health_id'];

        // A lost answer on a creating call: retried with its key, one effect.
        [$token, $headers] = self::fault('lose-answer');
        $name = "Lost answer $token";
        $answer = $pont->records->pushLabResult(['health_id' => $hid, 'test_name' => $name, 'result_value' => '4.1', 'unit' => 'mmol/L', 'flagged' => false], ['headers' => $headers]);
        $counts = self::faultCounts($token);
        self::assertSame([2, 2], [$counts['received'], $counts['forwarded']]);
        self::assertCount(1, array_unique($counts['idempotency_keys']));
        self::assertNotNull($counts['idempotency_keys'][0]);
        self::assertNotNull($pont->lastResponse()->requestId);
        $labs = array_filter(iterator_to_array($pont->records->autoPagingIterator('get', $hid, ['type' => 'lab_results'])), static fn ($r) => ($r['test_name'] ?? null) === $name);
        self::assertSame([$answer['lab_result_id']], array_values(array_column($labs, 'id')));

        // A lost answer on DELETE without a key: not retried (NetworkError, not a timeout), and it took effect once.
        $sub = $pont->webhooks->subscribe($info['receiver_url'], ['lab_result.released'], 'lost delete');
        [$token, $headers] = self::fault('lose-answer');
        try {
            $pont->webhooks->unsubscribe($sub['id'], ['headers' => $headers]);
            self::fail('no NetworkError');
        } catch (\Pont\NetworkError $e) {
            self::assertNotInstanceOf(\Pont\TimeoutError::class, $e);
        }
        self::assertSame(['received' => 1, 'forwarded' => 1, 'idempotency_keys' => [null]], self::faultCounts($token));
        self::assertNotContains($sub['id'], array_column($pont->webhooks->list()['subscriptions'], 'id'));
        // The same as the first call of a new client: the token request just before does not make it repeatable.
        $sub = $pont->webhooks->subscribe($info['receiver_url'], ['lab_result.released'], 'lost delete, new client');
        [$token, $headers] = self::fault('lose-answer');
        try {
            self::proxied()->webhooks->unsubscribe($sub['id'], ['headers' => $headers]);
            self::fail('no NetworkError');
        } catch (\Pont\NetworkError) {
        }
        self::assertSame(1, self::faultCounts($token)['received']);

        // A lost answer on a FHIR DELETE with a key: retried (deleting what is gone succeeds).
        $patient = $pont->fhir->create(['resourceType' => 'Patient', 'name' => [['family' => 'Delete', 'given' => ['Lost']]], 'birthDate' => '1990-01-01']);
        [$token, $headers] = self::fault('lose-answer');
        $pont->fhir->delete('Patient', $patient['id'], null, ['idempotency_key' => "del-$token", 'headers' => $headers]);
        self::assertSame(204, $pont->lastResponse()->status);
        self::assertSame(2, self::faultCounts($token)['forwarded']);

        // A reset on a read: sent again (by libcurl at once when the kept-alive connection died, else after a backoff).
        [$token, $headers] = self::fault('reset');
        $slept = [];
        self::assertSame('active', $pont->consents->status($hid, ['headers' => $headers])['status']);
        self::assertSame(2, self::faultCounts($token)['received']);
        self::assertLessThanOrEqual(1, count($slept));

        // 429 with Retry-After: 1 is waited exactly.
        [$token, $headers] = self::fault('status-429');
        $slept = [];
        self::assertTrue($pont->healthIds->verify($hid, [], ['headers' => $headers])['valid']);
        self::assertSame([1.0], $slept);
        self::assertSame(['received' => 2, 'forwarded' => 1, 'idempotency_keys' => [null, null]], self::faultCounts($token));

        // 503 on a POST without a key: not retried.
        [$token, $headers] = self::fault('status-503');
        try {
            $pont->fhir->create(['resourceType' => 'Patient', 'name' => [['family' => 'Never']]], null, ['headers' => $headers]);
            self::fail('no ServerError');
        } catch (\Pont\ServerError $e) {
            self::assertSame([503, 'SERVICE_UNAVAILABLE'], [$e->status, $e->errorCode]);
        }
        self::assertSame(1, self::faultCounts($token)['received']);

        // A slow answer: TimeoutError.
        [$token, $headers] = self::fault('slow');
        try {
            $pont->records->pushLabResult(['health_id' => $hid, 'test_name' => 'slow', 'result_value' => '1', 'flagged' => false], ['headers' => $headers, 'timeout' => 0.5, 'max_retries' => 0]);
            self::fail('no TimeoutError');
        } catch (\Pont\TimeoutError) {
        }
        self::assertSame(1, self::faultCounts($token)['received']);

        // Break-glass: refused without the reason, answered with it, and the reason audited.
        try {
            $pont->patients->getSummary($info['foreign_health_id']);
            self::fail('no ConsentRequiredError');
        } catch (\Pont\ConsentRequiredError) {
        }
        $reason = 'Unconscious patient in the ED ' . bin2hex(random_bytes(6));
        self::assertArrayHasKey('patient', $pont->patients->getSummary($info['foreign_health_id'], ['emergency_reason' => $reason, 'purpose_of_use' => 'ETREAT']));
        self::assertNotNull($pont->lastResponse()->requestId);
        $audited = null;
        foreach ($pont->fhir->autoPagingIterator('search', 'AuditEvent', ['_count' => 100]) as $event) {
            if (in_array($reason, array_column($event['purposeOfEvent'] ?? [], 'text'), true)) {
                $audited = $event;
                break;
            }
        }
        self::assertSame('BTG', $audited['purposeOfEvent'][0]['coding'][0]['code'] ?? null);

        // A Bridge sync whose answer is lost: sent again under its batch_id, counted once.
        $a = $info['demo']['bridge_agent'];
        $agent = new BridgeAgent(agentId: $a['agent_id'], agentKey: $a['agent_key'], facilityId: $a['facility_id'], baseUrl: $info['fault_url'], settings: ['sleep' => static fn () => null]);
        self::assertSame('ok', $agent->heartbeat('conformance-1.0')['status']);
        [$token, $headers] = self::fault('lose-answer');
        $batchId = "php-batch-$token";
        $synced = $agent->sync([['resourceType' => 'Practitioner', 'id' => 'dr-' . substr($token, -12), 'name' => [['family' => 'Sync']]]], $batchId, ['headers' => $headers]);
        self::assertSame([$batchId, 1, 0], [$synced['batch_id'], $synced['counts']['created'], $synced['counts']['failed']]);
        self::assertSame(['received' => 2, 'forwarded' => 2, 'idempotency_keys' => [$batchId, $batchId]], self::faultCounts($token));
        self::assertSame('true', $agent->lastResponse()->headers['idempotent-replayed'] ?? null);

        // Kept alive: several calls, one connection.
        $fresh = self::proxied();
        for ($i = 0; $i < 5; $i++) {
            $fresh->consents->status($hid);
        }
        self::assertSame(1, $fresh->connectionsOpened());
        $fresh->close();
    }

    public function testPagingOver1000ResourcesHoldsOnePage(): void
    {
        $paging = self::server()['paging'];
        $pont = self::proxied();
        $params = $paging['params'] + ['_count' => 100];
        gc_collect_cycles();
        $base = memory_get_usage();
        $peak = 0;
        $ids = [];
        foreach ($pont->fhir->autoPagingIterator('search', $paging['resource_type'], $params) as $resource) {
            $ids[$resource['id']] = true;
            $peak = max($peak, memory_get_usage() - $base);
        }
        $all = iterator_to_array($pont->fhir->autoPagingIterator('search', $paging['resource_type'], $params));
        $holding = memory_get_usage() - $base;
        self::assertSame([$paging['total'], $paging['total']], [count($ids), count($all)]);
        unset($all);

        // The search itself answers its first page, a plain array; pages() walks every page of the result, each
        // with its next link but the last.
        $first = $pont->fhir->search($paging['resource_type'], $params);
        self::assertTrue(is_array($first));
        self::assertSame(['Bundle', 100], [$first['resourceType'], count($first['entry'])]);
        $pages = 0;
        $entries = [];
        foreach ($pont->fhir->pages('search', $paging['resource_type'], $params) as $page) {
            self::assertTrue(is_array($page));
            $pages++;
            $hasNext = in_array('next', array_column($page['link'] ?? [], 'relation'), true);
            self::assertSame($pages < $paging['total'] / 100, $hasNext, "page $pages");
            foreach ($page['entry'] ?? [] as $entry) {
                $entries[$entry['resource']['id']] = true;
            }
        }
        self::assertSame([$paging['total'] / 100, $paging['total']], [$pages, count($entries)]);
        fwrite(STDERR, sprintf("\npaging %d resources: %.2f MB at most while iterating, %.2f MB holding them all\n", count($ids), $peak / 1e6, $holding / 1e6));
        self::assertLessThan($holding / 2, $peak);
    }

    public function testTypesAreGeneratedFromTheServedDocument(): void
    {
        require_once __DIR__ . '/../scripts/generate-types.php';
        $document = json_decode((string) file_get_contents(self::server()['base_url'] . '/api/openapi.json'), true, 512, JSON_THROW_ON_ERROR);
        self::assertSame(\Pont\Generate\render($document['components']['schemas']), file_get_contents(\Pont\Generate\OUT),
            'src/Types.php is out of date: php scripts/generate-types.php <base_url>/api/openapi.json');
    }

    public function testDiscoveryDocumentsAndProbesWithoutAToken(): void
    {
        $info = self::server();
        $sent = [];
        $pont = new Pont(clientId: 'cli_none', clientSecret: 'pcs_none', baseUrl: $info['base_url'], onRequest: static function (array $r) use (&$sent): void {
            $sent[] = $r['headers']['Authorization'] ?? null;
        });
        $smart = $pont->discovery->smartConfiguration();
        self::assertStringEndsWith('/api/v1/connect/auth/token', $smart['token_endpoint']);
        self::assertSame($smart['token_endpoint'], $pont->discovery->fhirSmartConfiguration()['token_endpoint']);
        self::assertStringEndsWith('/.well-known/jwks.json', $pont->discovery->oauthServerMetadata()['jwks_uri']);
        self::assertNotEmpty($pont->discovery->jwks()['keys']);
        self::assertArrayHasKey('/api/v1/mobile/consents', $pont->discovery->openapi()['paths']);
        self::assertSame('ok', $pont->system->healthz()['status']);
        self::assertSame('ok', $pont->system->readyz()['checks']['database'] ?? null);
        self::assertSame(array_fill(0, 7, null), $sent); // bogus credentials, never used
    }

    public function testPatientAppPairsAnswersRevokesReadsItsLogAndSignsOut(): void
    {
        $info = self::server();
        $full = $info['demo']['clients'][0];
        $pont = new Pont(clientId: $full['client_id'], clientSecret: $full['client_secret'], baseUrl: $info['base_url']);
        $clinic = new Pont(clientId: $info['clinic']['client_id'], clientSecret: $info['clinic']['client_secret'], baseUrl: $info['base_url']);
        $hid = $pont->healthIds->resolve(['first_name' => 'Kofi', 'last_name' => 'Mobile' . bin2hex(random_bytes(4)), 'date_of_birth' => '1988-04-05', 'sex' => 'male'])['health_id'];
        $code = $pont->patients->issuePairingCode($hid)['code']; // the demo organisation registered the patient: it may pair
        $raises = static function (string $class, callable $call): void {
            try {
                $call();
                self::fail("no $class");
            } catch (\Pont\PontError $e) {
                self::assertInstanceOf($class, $e);
            }
        };
        $raises(\Pont\AuthenticationError::class, static fn () => (new PatientApp(baseUrl: $info['base_url']))->signIn($hid, 'WRONG-CODE'));
        $app = new PatientApp(baseUrl: $info['fault_url'], settings: ['sleep' => static fn () => null]);
        self::assertFalse($app->signedIn());
        $token = $app->signIn($hid, $code);
        self::assertStringStartsWith('pat_', $token['access_token']);
        self::assertTrue($app->signedIn());

        // The clinic asks; so does the demo organisation, which paired the app: the app never approves that one's requests.
        $asked = $clinic->consents->request(['health_id' => $hid, 'purpose' => 'follow-up', 'requested_scopes' => ['labs:read']]);
        $own = $pont->consents->request(['health_id' => $hid, 'purpose' => 'second opinion', 'requested_scopes' => ['labs:read']]);
        $mine = array_column($app->consents()['items'], 'status', 'consent_id');
        self::assertSame(['pending', 'pending'], [$mine[$asked['consent_request_id']], $mine[$own['consent_request_id']]]);
        $approved = $app->approveRequest($asked['consent_request_id']);
        self::assertSame([$info['clinic']['organization_id'], 'active'], [$approved['organization_id'], $approved['status']]);
        self::assertSame('active', $clinic->consents->status($hid)['status']);
        $raises(\Pont\AuthorizationError::class, static fn () => $app->approveRequest($own['consent_request_id']));
        self::assertSame('denied', $app->denyRequest($own['consent_request_id'])['status']);
        $raises(\Pont\ConflictError::class, static fn () => $app->denyRequest($own['consent_request_id']));

        // A revocation whose answer is lost: sent once (the server does not deduplicate mobile writes), and it took effect.
        [$faultId, $headers] = self::fault('lose-answer');
        $raises(\Pont\NetworkError::class, static fn () => $app->revokeConsent($approved['consent_id'], ['headers' => $headers]));
        self::assertSame(['received' => 1, 'forwarded' => 1, 'idempotency_keys' => [null]], self::faultCounts($faultId));
        self::assertSame('revoked', array_column($app->consents()['items'], 'status', 'consent_id')[$approved['consent_id']]);
        self::assertSame('revoked', $clinic->consents->status($hid)['status']);

        // The access log: a reset connection on a read is retried; iterated in pages of two.
        [$faultId, $headers] = self::fault('reset');
        self::assertCount(2, $app->accessLog(['limit' => 2], ['headers' => $headers])['items']);
        self::assertSame(2, self::faultCounts($faultId)['received']);
        $log = iterator_to_array($app->autoPagingIterator('accessLog', ['limit' => 2]), false);
        self::assertGreaterThan(2, count($log));
        self::assertSame([], array_diff(['issuePairingCode', 'approveConsentRequest'], array_column($log, 'operation')));

        $app->signOut();
        self::assertFalse($app->signedIn());
        $raises(\Pont\AuthenticationError::class, static fn () => (new PatientApp(baseUrl: $info['base_url'], token: $token['access_token']))->consents());
    }

    public function testCreateChecksTheCredentialsWithOneTokenRequestAndTheConstructorMakesNone(): void
    {
        $info = self::server();
        $full = $info['demo']['clients'][0];
        $sent = [];
        $hook = static function (array $request) use (&$sent): void {
            $sent[] = $request['method'] . ' ' . parse_url($request['url'], PHP_URL_PATH);
        };
        $token = 'POST /api/v1/connect/auth/token';

        // The constructor is lazy, even with a wrong secret: no request.
        new Pont(clientId: $full['client_id'], clientSecret: 'pcs_wrong', baseUrl: $info['base_url'], onRequest: $hook);
        self::assertSame([], $sent);

        // Eager, right secret (the constructor's arguments as an array, or as named arguments): one token request
        // before create returns; the next call reuses that token.
        $hid = $info['demo']['patients'][0]['health_id'];
        foreach ([
            static fn () => Pont::create(['clientId' => $full['client_id'], 'clientSecret' => $full['client_secret'], 'baseUrl' => $info['base_url'], 'onRequest' => $hook]),
            static fn () => Pont::create(clientId: $full['client_id'], clientSecret: $full['client_secret'], baseUrl: $info['base_url'], onRequest: $hook),
        ] as $create) {
            $sent = [];
            $pont = $create();
            self::assertInstanceOf(Pont::class, $pont);
            self::assertSame([$token], $sent);
            self::assertTrue($pont->healthIds->verify($hid)['valid']);
            self::assertSame([$token, "GET /api/v1/connect/patients/verify/$hid"], $sent);
            $pont->close();
        }

        // Eager, wrong secret or unknown client: AuthenticationError from create itself, after one token request.
        foreach ([[$full['client_id'], 'pcs_wrong'], ['cli_unknown', $full['client_secret']]] as [$clientId, $clientSecret]) {
            $sent = [];
            try {
                Pont::create(['clientId' => $clientId, 'clientSecret' => $clientSecret, 'baseUrl' => $info['base_url'], 'onRequest' => $hook]);
                self::fail("$clientId: bad credentials accepted");
            } catch (\Pont\AuthenticationError $e) {
                self::assertSame(401, $e->status);
            }
            self::assertSame([$token], $sent, $clientId);
        }

        // Arguments that are not the constructor's, or no secret: refused before any request.
        $sent = [];
        foreach ([
            'unknown argument clientSecrett' => ['clientId' => 'cli_x', 'clientSecrett' => 'pcs_x', 'onRequest' => $hook],
            'clientId and clientSecret are required' => ['clientId' => 'cli_x', 'baseUrl' => $info['base_url'], 'onRequest' => $hook],
        ] as $message => $arguments) {
            try {
                Pont::create($arguments);
                self::fail("accepted: $message");
            } catch (\Pont\ValidationError $e) {
                self::assertStringContainsString($message, $e->getMessage());
            }
        }
        self::assertSame([], $sent);
    }

    public function testLiveScenario(): void
    {
        $info = self::server();
        $full = $info['demo']['clients'][0];
        try {
            (new Pont(clientId: $full['client_id'], clientSecret: 'pcs_wrong', baseUrl: $info['base_url']))->healthIds->verify('CM482930174629');
            self::fail('bad credentials accepted');
        } catch (\Pont\AuthenticationError) {
        }
        $pont = Pont::create(['clientId' => $full['client_id'], 'clientSecret' => $full['client_secret'], 'baseUrl' => $info['base_url']]);
        $patient = $info['demo']['patients'][0];
        $hid = $patient['health_id'];
        $pid = $patient['patient_id'];

        self::assertSame('found', $pont->healthIds->resolve(['health_id' => $hid])['status']);
        $created = $pont->healthIds->resolve(['first_name' => 'Ama', 'last_name' => 'Conformance', 'date_of_birth' => '1991-02-03', 'sex' => 'female']);
        self::assertSame('created', $created['status']);
        self::assertTrue($pont->healthIds->verify($hid)['valid']);

        self::assertSame('active', $pont->consents->status($hid)['status']);
        $newHid = $created['health_id'];
        $expires = gmdate('Y-m-d\TH:i:s\Z', time() + 86400);
        self::assertSame('active', $pont->consents->grant($newHid, ['consent_type' => 'full_record', 'expires_at' => $expires])['status']);
        self::assertSame('revoked', $pont->consents->revoke($newHid)['status']);
        self::assertSame('pending', $pont->consents->request(['health_id' => $newHid, 'purpose' => 'follow-up', 'requested_scopes' => ['labs:read']])['status']);
        self::assertNotEmpty($pont->patients->issuePairingCode($hid)['code']);

        self::assertSame($patient['first_name'], $pont->patients->getSummary($hid)['patient']['first_name']);
        self::assertSame($hid, $pont->patients->search($hid)['health_id']);
        self::assertIsArray($pont->records->get($hid, ['type' => 'diagnoses'])['records']['diagnoses']);

        $sub = $pont->webhooks->subscribe($info['receiver_url'], ['lab_result.released'], 'conformance');
        self::assertStringStartsWith('whsec_', $sub['webhook_secret']);
        $lab = $pont->records->pushLabResult(['health_id' => $hid, 'test_name' => 'Hemoglobin', 'result_value' => '6.1', 'unit' => 'g/dL', 'flagged' => true, 'flag_level' => 'critical_low']);
        self::assertSame('LL', $lab['flag']);
        $enc = $pont->records->pushEncounter(['health_id' => $hid, 'encounter_type' => 'cdss_alert', 'alert_type' => 'drug_interaction', 'severity' => 'high', 'clinical_note' => 'check INR']);
        self::assertNotEmpty($enc['detected_issue_id']);

        foreach ([
            $pont->fhir->medicationRequests($hid, ['status' => 'active']),
            $pont->fhir->allergyIntolerances($hid),
            $pont->fhir->diagnosticReports($hid),
            $pont->fhir->conditions($hid, ['clinical-status' => 'active']),
            $pont->fhir->patientEverything($hid, ['_count' => 20]),
            $pont->fhir->everything($pid, ['_count' => 20]),
        ] as $bundle) {
            self::assertSame('Bundle', $bundle['resourceType']);
        }
        self::assertGreaterThan(10, count(iterator_to_array($pont->fhir->autoPagingIterator('search', 'Observation', ['_count' => 10, 'patient' => "Patient/$pid"])))); // every page
        self::assertSame('Patient', $pont->fhir->read('Patient', $pid)['resourceType']);
        self::assertSame('CapabilityStatement', $pont->fhir->capabilities()['resourceType']);
        self::assertNotEmpty($pont->fhir->searchPost('Observation', ['patient' => "Patient/$pid"])['entry']);
        self::assertNotEmpty($pont->fhir->searchCompartment($pid, 'Condition')['entry']);

        // FHIR writes: create, update with If-Match, history, vread, conditional update, transaction, delete.
        $org = $pont->fhir->create(['resourceType' => 'Organization', 'name' => 'Clinique du Lac']);
        $org['name'] = 'Clinique du Lac (renamed)';
        $updated = $pont->fhir->update($org, 'W/"' . $org['meta']['versionId'] . '"');
        self::assertNotSame($org['meta']['versionId'], $updated['meta']['versionId']);
        try {
            $pont->fhir->update($org, 'W/"' . $org['meta']['versionId'] . '"');
            self::fail('a stale If-Match accepted');
        } catch (\Pont\PreconditionFailedError) {
        }
        self::assertCount(2, $pont->fhir->history('Organization', $org['id'])['entry']);
        self::assertNotEmpty($pont->fhir->history('Organization', null, ['_count' => 5])['entry']);
        self::assertSame('Clinique du Lac', $pont->fhir->vread('Organization', $org['id'], $org['meta']['versionId'])['name']);
        $ident = 'cond-' . bin2hex(random_bytes(6));
        $cond = $pont->fhir->conditionalUpdate(['resourceType' => 'Organization', 'name' => 'Cond', 'identifier' => [['system' => 'urn:x', 'value' => $ident]]], ['identifier' => "urn:x|$ident"]);
        self::assertSame(201, $pont->lastResponse()->status);
        $result = $pont->fhir->transaction(['resourceType' => 'Bundle', 'type' => 'transaction', 'entry' => [
            ['resource' => ['resourceType' => 'Organization', 'name' => 'In a bundle'], 'request' => ['method' => 'POST', 'url' => 'Organization']]]]);
        self::assertSame('transaction-response', $result['type']);
        $pont->fhir->conditionalDelete('Organization', ['identifier' => "urn:x|$ident"]);
        self::assertSame(204, $pont->lastResponse()->status);
        try {
            $pont->fhir->read('Organization', $cond['id']);
            self::fail('a conditionally deleted resource is still read');
        } catch (\Pont\PontError $e) {
            self::assertSame(410, $e->status);
        }
        $pont->fhir->delete('Organization', $org['id']);
        self::assertSame(204, $pont->lastResponse()->status);

        // The delivery the receiver got (the worker sends it in the background: up to 60 s on a busy machine).
        $deliveryOf = static function (string $labResultId) use ($info): ?array {
            for ($giveUp = microtime(true) + 60; microtime(true) < $giveUp;) {
                foreach (json_decode((string) file_get_contents($info['receiver_url']), true) as $d) {
                    if ((json_decode($d['raw_body'], true)['data']['lab_result_id'] ?? null) === $labResultId) {
                        return $d;
                    }
                }
                usleep(100_000);
            }
            return null;
        };
        $delivery = $deliveryOf($lab['lab_result_id']);
        self::assertNotNull($delivery);
        self::assertTrue($pont->webhooks->verifySignature($delivery['raw_body'], $delivery['signature'], $sub['webhook_secret']));
        $event = $pont->webhooks->parseEvent($delivery['raw_body'], $delivery['signature'], $sub['webhook_secret']);
        self::assertSame($hid, $event['data']['health_id']);
        self::assertContains($sub['id'], array_column($pont->webhooks->list()['subscriptions'], 'id'));
        self::assertSame($event['id'], $pont->webhooks->replay($event['id'])['event_id']);
        self::assertNotEmpty($pont->webhooks->eventDeliveries($event['id'])['deliveries']);
        self::assertContains($event['id'], array_column(iterator_to_array($pont->webhooks->autoPagingIterator('deliveries', ['subscription_id' => $sub['id'], 'limit' => 1])), 'event_id'));
        // A rotation with overlap: the next delivery is signed with both secrets, and either verifies it.
        $rotated = $pont->webhooks->rotateSecret($sub['id'], 3600);
        self::assertStringStartsWith('whsec_', $rotated['webhook_secret']);
        self::assertNotEmpty($rotated['previous_secret_expires_at']);
        $lab2 = $pont->records->pushLabResult(['health_id' => $hid, 'test_name' => 'Potassium', 'result_value' => '6.9', 'unit' => 'mmol/L', 'flagged' => true, 'flag_level' => 'critical_high']);
        $during = $deliveryOf($lab2['lab_result_id']);
        self::assertNotNull($during);
        self::assertSame(2, substr_count($during['signature'], 'v1='));
        foreach ([$rotated['webhook_secret'], $sub['webhook_secret']] as $secret) {
            self::assertTrue($pont->webhooks->verifySignature($during['raw_body'], $during['signature'], $secret));
        }
        $pont->webhooks->unsubscribe($sub['id']);

        self::assertNotEmpty($pont->inventory->bloodInventory(['facility_id' => 'fac-demo'])['items']);
        self::assertSame(['198440'], array_map(static fn ($i) => $i['medication']['code'], iterator_to_array($pont->inventory->autoPagingIterator('pharmacyStock', ['facility_id' => 'fac-demo', 'below_reorder_level' => true]))));
        self::assertCount(5, $pont->payments->reconciliation($info['demo']['seeded']['payments_date'])['payments']);
        $line = ['medication' => ['code' => 'php-stock-1', 'code_system' => 'http://www.nlm.nih.gov/research/umls/rxnorm'], 'quantity_on_hand' => 5];
        self::assertSame(1, $pont->inventory->updatePharmacyStock(['facility_id' => 'fac-demo', 'items' => [$line]])['created']);

        $token = $pont->auth->token();
        self::assertTrue($pont->auth->introspect($token['access_token'])['active']);
        self::assertNotEmpty($pont->auth->introspectCurrent());

        $raises = static function (string $class, callable $call): void {
            try {
                $call();
                self::fail("no $class");
            } catch (\Pont\PontError $e) {
                self::assertInstanceOf($class, $e);
            }
        };
        $raises(\Pont\NotFoundError::class, static fn () => $pont->records->get($info['unregistered_health_id']));
        $raises(\Pont\NotFoundException::class, static fn () => $pont->records->get($info['unregistered_health_id']));
        $raises(\Pont\ValidationError::class, static fn () => $pont->healthIds->verify(substr($hid, 0, 2) . (((int) $hid[2] + 1) % 10) . substr($hid, 3)) /* one digit changed: always detected */);
        $raises(\Pont\ValidationError::class, static fn () => $pont->records->pushLabResult(['health_id' => $hid, 'test_name' => 'K', 'result_value' => '4', 'flagged' => true, 'flag_level' => 'normal']));
        $raises(\Pont\ConsentRequiredError::class, static fn () => $pont->patients->getSummary($info['foreign_health_id']));

        // The client's own secret, rotated with an overlap: both secrets get tokens until it ends.
        $newSecret = $pont->auth->rotateClientSecret(3600);
        self::assertStringStartsWith('pcs_', $newSecret['client_secret']);
        foreach ([$newSecret['client_secret'], $full['client_secret']] as $secret) {
            self::assertNotEmpty((new Pont(clientId: $full['client_id'], clientSecret: $secret, baseUrl: $info['base_url']))->auth->introspectCurrent());
        }
    }

    /**
     * Last (PHPUnit runs a class's tests in order): the reset replaces the clients the demo seeded and keeps the
     * every-scope integrator made beside it (as a person would make it with the CLI).
     */
    public function testDemoResetThenTheFreshDemo(): void
    {
        $info = self::server();
        $full = $info['demo']['clients'][0];
        $seeded = $info['demo']['clients'][1];
        $pont = new Pont(clientId: $full['client_id'], clientSecret: $full['client_secret'], baseUrl: $info['base_url']);
        $pont->auth->introspectCurrent();
        $demo = $pont->demo->reset();
        self::assertSame(201, $pont->lastResponse()->status);
        self::assertSame(2, $demo['replaced']['clients']);
        self::assertCount(5, $demo['patients']);
        $fresh = new Pont(clientId: $demo['clients'][0]['client_id'], clientSecret: $demo['clients'][0]['client_secret'], baseUrl: $info['base_url']);
        self::assertTrue($fresh->healthIds->verify($demo['patients'][0]['health_id'])['valid']);
        $pont->auth->introspectCurrent(); // not the demo's: kept
        try {
            Pont::create(['clientId' => $seeded['client_id'], 'clientSecret' => $seeded['client_secret'], 'baseUrl' => $info['base_url']]);
            self::fail('the reset left the client the demo seeded');
        } catch (\Pont\AuthenticationError) {
        }
    }
}
