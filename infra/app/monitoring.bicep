// Logs and telemetry: Application Insights on a Log Analytics workspace, Entra ID ingestion only.
param logAnalyticsName string
param applicationInsightsName string
param location string
param tags object = {}

// Alerts on the app's own metrics and traces (shared/telemetry.py); docs/deployment.md says how
// to change them.
@description('Turn the alert rules on (they are created either way).')
param alertsEnabled bool = true
@description('Who the action group e-mails when an alert fires; none: the alerts show in the portal only.')
param alertEmailAddress string = ''
@description('The timer is taken for silent after this many minutes without a tick.')
param timerSilentMinutes int = 3
@description('Alert when the 95th percentile of lateness (due time to call) over 15 minutes exceeds this.')
param latenessP95ThresholdMs int = 10000

resource workspace 'Microsoft.OperationalInsights/workspaces@2025-02-01' = {
  name: logAnalyticsName
  location: location
  tags: tags
  properties: {
    sku: {
      name: 'PerGB2018'
    }
    retentionInDays: 30
  }
}

resource insights 'Microsoft.Insights/components@2020-02-02' = {
  name: applicationInsightsName
  location: location
  tags: tags
  kind: 'web'
  properties: {
    Application_Type: 'web'
    WorkspaceResourceId: workspace.id
    DisableLocalAuth: true
  }
}

resource alertGroup 'Microsoft.Insights/actionGroups@2023-01-01' = {
  name: 'ag-${applicationInsightsName}'
  location: 'global'
  tags: tags
  properties: {
    groupShortName: 'scheduler'
    enabled: true
    emailReceivers: empty(alertEmailAddress)
      ? []
      : [
          {
            name: 'operator'
            emailAddress: alertEmailAddress
            useCommonAlertSchema: true
          }
        ]
  }
}

// Each alert: a log query on Application Insights, the column it measures, and when it fires.
// customMetrics holds the metrics as exported (a row per minute and dimension set: valueSum,
// valueMax); requests holds the executions' spans, whose attributes are in customDimensions.
var alerts = [
  {
    name: 'executions-failed'
    description: 'Executions failed or a job faulted in the last 5 minutes (by collection and job).'
    severity: 2
    query: '''
customMetrics
| where name == "scheduler.executions"
| extend outcome = tostring(customDimensions.outcome), collection = tostring(customDimensions.collection), job = tostring(customDimensions.job)
| where outcome in ("failed", "faulted")
| summarize failures = sum(valueSum) by collection, job
'''
    measure: 'failures'
    aggregation: 'Total'
    operator: 'GreaterThan'
    threshold: 0
    dimensions: ['collection', 'job']
    window: 'PT5M'
    frequency: 'PT5M'
  }
  {
    name: 'poison-messages'
    description: 'Messages wait on the poison queue: their attempts were recorded as failed.'
    severity: 2
    query: '''
customMetrics
| where name == "scheduler.queue.poison"
| summarize poison = max(valueMax)
'''
    measure: 'poison'
    aggregation: 'Maximum'
    operator: 'GreaterThan'
    threshold: 0
    dimensions: []
    window: 'PT5M'
    frequency: 'PT5M'
  }
  {
    name: 'timer-silent'
    description: 'The timer has not ticked for ${timerSilentMinutes} minutes: no job is handed to the queue.'
    severity: 1
    query: 'customMetrics | where name == "scheduler.timer.ticks" and timestamp > ago(${timerSilentMinutes}m)'
    measure: ''
    aggregation: 'Count'
    operator: 'LessThan'
    threshold: 1
    dimensions: []
    window: 'PT5M'
    frequency: 'PT1M'
  }
  {
    name: 'lateness-p95'
    description: 'The 95th percentile of lateness, from due time to call, exceeds ${latenessP95ThresholdMs} ms.'
    severity: 3
    query: '''
requests
| where name == "execution"
| summarize p95 = percentile(todouble(customDimensions["scheduler.lateness_ms"]), 95)
'''
    measure: 'p95'
    aggregation: 'Maximum'
    operator: 'GreaterThan'
    threshold: latenessP95ThresholdMs
    dimensions: []
    window: 'PT15M'
    frequency: 'PT5M'
  }
]

resource alertRules 'Microsoft.Insights/scheduledQueryRules@2023-12-01' = [
  for alert in alerts: {
    name: '${applicationInsightsName}-${alert.name}'
    location: location
    tags: tags
    kind: 'LogAlert'
    properties: {
      displayName: 'Scheduler: ${alert.name}'
      description: alert.description
      severity: alert.severity
      enabled: alertsEnabled
      scopes: [insights.id]
      evaluationFrequency: alert.frequency
      windowSize: alert.window
      autoMitigate: true
      // The metrics exist only once the app has sent them: a fresh deployment has none yet.
      skipQueryValidation: true
      criteria: {
        allOf: [
          {
            query: alert.query
            timeAggregation: alert.aggregation
            metricMeasureColumn: empty(alert.measure) ? null : alert.measure
            operator: alert.operator
            threshold: alert.threshold
            dimensions: [for dimension in alert.dimensions: {
              name: dimension
              operator: 'Include'
              values: ['*']
            }]
            failingPeriods: {
              numberOfEvaluationPeriods: 1
              minFailingPeriodsToAlert: 1
            }
          }
        ]
      }
      actions: {
        actionGroups: [alertGroup.id]
      }
    }
  }
]

output applicationInsightsName string = insights.name
output alertRuleNames array = [for (alert, index) in alerts: alertRules[index].name]
