<?php

declare(strict_types=1);

use PHPUnit\Framework\TestCase;
use Pont\Pont;
use Pont\Webhooks;

/** The conformance suite (clients/conformance) for the PHP library. */
final class ClientTest extends TestCase
{
    private const CONFORMANCE = __DIR__ . '/../../conformance/';

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
     * A sender that answers the token endpoint, then each of $answers ([status, headers, body]) in turn.
     *
     * @param list<array{0: int, 1: array<string, string>, 2: mixed}> $answers
     * @param list<array{url: string, headers: array<string, string>}> $calls
     */
    private static function fakeSender(array &$answers, array &$calls): callable
    {
        $tokens = 0;
        return static function (string $method, string $url, array $headers, ?string $body, float $timeout) use (&$answers, &$calls, &$tokens): array {
            if (str_ends_with($url, '/auth/token')) {
                $tokens++;
                return [200, [], json_encode(['access_token' => "tok-$tokens", 'expires_in' => $tokens === 1 ? 30 : 3600])];
            }
            $calls[] = ['url' => $url, 'headers' => $headers];
            [$status, $resHeaders, $resBody] = array_shift($answers);
            return [$status, array_change_key_case($resHeaders), is_string($resBody) ? $resBody : json_encode($resBody)];
        };
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
                    self::assertInstanceOf(\Pont\ServiceException::class, $e);
                }
            }
        }
    }

    public function testErrorVectors(): void
    {
        foreach (self::vectors()['errors'] as $case) {
            $answers = [[$case['status'], $case['headers'], $case['body']], [$case['status'], $case['headers'], $case['body']]];
            $calls = [];
            $pont = new Pont(clientId: 'cli_x', clientSecret: 'pcs_x', baseUrl: 'http://pont.invalid', maxRetries: 0, sender: self::fakeSender($answers, $calls));
            try {
                $pont->healthIds->verify('CM482930174629');
                self::fail("no exception: {$case['name']}");
            } catch (\Pont\ServiceException $e) {
                self::assertInstanceOf('Pont\\' . $case['exception'], $e, $case['name']);
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

    public function testRetriesKeepTheIdempotencyKeyAndTheTokenIsRefreshed(): void
    {
        $answers = [
            [429, [], ['status' => 'error', 'error_code' => 'RATE_LIMITED', 'message' => 'slow down', 'retry_after' => 0]],
            [503, [], '<html>busy</html>'],
            [201, [], ['lab_result_id' => 'x']],
            [422, [], ['status' => 'error', 'error_code' => 'VALIDATION_FAILED', 'message' => 'bad']],
        ];
        $calls = [];
        $pont = new Pont(clientId: 'cli_x', clientSecret: 'pcs_x', baseUrl: 'http://pont.invalid', backoff: 0.001, sender: self::fakeSender($answers, $calls));
        $fields = ['health_id' => 'CM482930174629', 'test_name' => 'K', 'result_value' => '4', 'flagged' => false];
        self::assertSame(['lab_result_id' => 'x'], $pont->records->pushLabResult($fields));
        self::assertCount(3, $calls);
        self::assertCount(1, array_unique(array_map(static fn ($c) => $c['headers']['Idempotency-Key'], $calls)));
        self::assertSame('Bearer tok-2', $calls[0]['headers']['Authorization']); // the first token expired within 60 s
        $this->expectException(\Pont\ValidationError::class);
        try {
            $pont->records->pushLabResult($fields);
        } finally {
            self::assertCount(4, $calls); // a 422 is never retried
        }
    }

    public function testNextTokensUseTheRotatedSecret(): void
    {
        $secretsUsed = [];
        $send = static function (string $method, string $url, array $headers, ?string $body) use (&$secretsUsed): array {
            $sent = json_decode($body ?? '{}', true) ?? [];
            if (str_ends_with($url, '/auth/token')) {
                $secretsUsed[] = $sent['client_secret'];
                // Tokens that expire within 60 s: every call asks for a new one.
                return [200, [], json_encode(['access_token' => 't', 'expires_in' => 30])];
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
        self::assertSame(['pcs_old', 'pcs_old', 'pcs_new'], $secretsUsed);
    }

    public function testMissingArgumentFailsBeforeAnyRequest(): void
    {
        $answers = [];
        $calls = [];
        $pont = new Pont(clientId: 'cli_x', clientSecret: 'pcs_x', baseUrl: 'http://pont.invalid', sender: self::fakeSender($answers, $calls));
        try {
            $pont->records->pushLabResult(['health_id' => 'CM482930174629']);
            self::fail('accepted');
        } catch (\Pont\ValidationError $e) {
            self::assertStringContainsString('test_name is required', $e->getMessage());
        }
        self::assertSame([], $calls);
    }

    /** @return array<string, mixed> */
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

    public function testLiveScenario(): void
    {
        $info = self::server();
        $full = $info['demo']['clients'][0];
        try {
            new Pont(clientId: $full['client_id'], clientSecret: 'pcs_wrong', baseUrl: $info['base_url']);
            self::fail('bad credentials accepted');
        } catch (\Pont\AuthenticationError) {
        }
        $pont = new Pont(clientId: $full['client_id'], clientSecret: $full['client_secret'], baseUrl: $info['base_url']);
        $patient = $info['demo']['patients'][0];
        $hid = $patient['health_id'];

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
        ] as $bundle) {
            self::assertSame('Bundle', $bundle['resourceType']);
        }
        $observations = $pont->fhir->search('Observation', ['_count' => 10, 'patient' => 'Patient/' . $patient['patient_id']]);
        self::assertGreaterThan(10, count($observations['entry'])); // every page, not the first 10
        self::assertSame('Patient', $pont->fhir->read('Patient', $patient['patient_id'])['resourceType']);

        $deliveryOf = static function (string $labResultId) use ($info): ?array {
            for ($i = 0; $i < 100; $i++) {
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
        self::assertSame(['198440'], array_map(static fn ($i) => $i['medication']['code'], $pont->inventory->pharmacyStock(['facility_id' => 'fac-demo', 'below_reorder_level' => true])['items']));
        self::assertCount(5, $pont->payments->reconciliation($info['demo']['seeded']['payments_date'])['payments']);

        $raises = static function (string $class, callable $call): void {
            try {
                $call();
                self::fail("no $class");
            } catch (\Pont\ServiceException $e) {
                self::assertInstanceOf($class, $e);
            }
        };
        $raises(\Pont\NotFoundException::class, static fn () => $pont->records->get($info['unregistered_health_id']));
        $raises(\Pont\ValidationError::class, static fn () => $pont->healthIds->verify(substr($hid, 0, -2) . (str_ends_with($hid, '00') ? '01' : '00')));
        $raises(\Pont\ValidationError::class, static fn () => $pont->records->pushLabResult(['health_id' => $hid, 'test_name' => 'K', 'result_value' => '4', 'flagged' => true, 'flag_level' => 'normal']));
        $raises(\Pont\ConsentRequiredError::class, static fn () => $pont->patients->getSummary($info['foreign_health_id']));

        // The client's own secret, rotated with an overlap: both secrets get tokens until it ends.
        $newSecret = $pont->auth->rotateClientSecret(3600);
        self::assertStringStartsWith('pcs_', $newSecret['client_secret']);
        foreach ([$newSecret['client_secret'], $full['client_secret']] as $secret) {
            self::assertInstanceOf(Pont::class, new Pont(clientId: $full['client_id'], clientSecret: $secret, baseUrl: $info['base_url']));
        }
    }
}
